BtargetJ
8ÀB¿å¿¦À™¿