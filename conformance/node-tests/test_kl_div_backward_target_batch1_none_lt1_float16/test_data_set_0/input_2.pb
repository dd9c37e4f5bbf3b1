
BtargetJ
°ÇÝ¼ì½±¼-¿