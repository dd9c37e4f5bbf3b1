
BtargetJ
c<?<B»æ¸~5