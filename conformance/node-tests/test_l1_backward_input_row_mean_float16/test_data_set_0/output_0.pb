
BoutputJ
ù∞ù¨ù∞ù¨ù0