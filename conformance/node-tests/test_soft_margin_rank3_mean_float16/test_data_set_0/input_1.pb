
BtargetJí8o9©¸