
BtargetJ¼â=!>