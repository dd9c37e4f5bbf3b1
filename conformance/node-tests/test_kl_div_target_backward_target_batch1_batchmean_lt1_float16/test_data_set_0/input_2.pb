
BtargetJ
W¹R¿ÄSÂG½