
BtargetJÎ<:%8