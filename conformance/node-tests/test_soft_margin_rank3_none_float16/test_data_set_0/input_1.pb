
BtargetJì5e<b8