
BtargetJ
8"1L$k)G4