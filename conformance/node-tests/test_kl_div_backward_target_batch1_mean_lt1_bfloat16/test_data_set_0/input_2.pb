BtargetJ
öÀœ¿¾¿–¿æ¿