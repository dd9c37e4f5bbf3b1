
BoutputJ
Ê¿Ì°§(»