
BinputJ
`À„ÂÀÏ»Y¼