
BtargetJÍ4