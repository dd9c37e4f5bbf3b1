
BweightJ
_6~2}*Ð2S;