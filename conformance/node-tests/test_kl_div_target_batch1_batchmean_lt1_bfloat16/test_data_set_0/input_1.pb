BtargetJ
ÀÀÀÙ¿A¿