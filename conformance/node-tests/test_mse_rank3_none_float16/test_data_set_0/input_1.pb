
BtargetJ¿±~¾m°