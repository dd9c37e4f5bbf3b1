BtargetJ
Á¿]>Þ½>>