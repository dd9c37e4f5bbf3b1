
BtargetJB2<>