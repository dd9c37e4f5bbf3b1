
BtargetJ
¾>¾Ž2‡9Æ=