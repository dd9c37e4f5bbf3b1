
BtargetJ­=U¼âÁ