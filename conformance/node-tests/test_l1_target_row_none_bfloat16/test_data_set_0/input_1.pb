BtargetJ
!?\>R¿6;¾