
BoutputJ
kBk>kBk>kÂ