
BinputJ¼N¼ ?