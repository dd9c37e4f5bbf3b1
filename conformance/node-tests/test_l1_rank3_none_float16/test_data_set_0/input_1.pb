
BtargetJ¸'¼09