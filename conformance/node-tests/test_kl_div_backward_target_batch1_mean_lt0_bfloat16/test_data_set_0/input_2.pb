BtargetJ
ð9˜>i>ž>*>