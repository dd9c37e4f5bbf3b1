
BinputJº¼2>M¼‚2Í=T/