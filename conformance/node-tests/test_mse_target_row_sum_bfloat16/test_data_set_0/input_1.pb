BtargetJ
ÿȿR>1?�?