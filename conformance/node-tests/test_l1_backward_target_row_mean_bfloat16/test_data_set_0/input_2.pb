BtargetJ
F>¨¿Q?Ó½$¿