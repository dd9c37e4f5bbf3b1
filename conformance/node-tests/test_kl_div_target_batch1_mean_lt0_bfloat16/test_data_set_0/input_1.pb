BtargetJ
Ù=ä=>;>ñ>