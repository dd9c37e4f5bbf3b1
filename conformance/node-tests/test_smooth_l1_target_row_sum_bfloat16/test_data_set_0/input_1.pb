BtargetJ
Œ?ˆ?h¿¿°>