
BtargetJ
-2A½‡:˜®#¹