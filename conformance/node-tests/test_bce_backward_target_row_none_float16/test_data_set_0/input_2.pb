
BtargetJ
¿4!Ÿ:/[+