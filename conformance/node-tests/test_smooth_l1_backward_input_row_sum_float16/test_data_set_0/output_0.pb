
BoutputJ
@<A¥¸Á@„Á