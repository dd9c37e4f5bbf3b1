BtargetJ
?$>Š<-=‰>