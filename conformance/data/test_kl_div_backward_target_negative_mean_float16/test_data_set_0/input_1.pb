
BinputJŽ.¶:tº