
BtargetJ
Ç. /0Û1Š7