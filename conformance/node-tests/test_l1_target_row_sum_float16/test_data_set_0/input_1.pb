
BtargetJ
9‡2è∫≤¥∞