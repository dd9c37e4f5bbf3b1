
BtargetJé61=P2