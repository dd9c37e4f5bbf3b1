
BtargetJ
€¾4H3ó4R1