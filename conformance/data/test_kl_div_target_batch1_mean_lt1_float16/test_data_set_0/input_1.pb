
BtargetJ
ца╨,©,ее╪