
BtargetJ
-+~7T1ÎÛ4