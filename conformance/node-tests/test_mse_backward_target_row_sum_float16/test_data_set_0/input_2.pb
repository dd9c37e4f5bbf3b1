
BtargetJ
¾ê2ð®e0
4