
BtargetJ
å:á/æ;ç;‘3