
BinputJ¶‘7uºU5]88Ä5