
BtargetJU>H¹((