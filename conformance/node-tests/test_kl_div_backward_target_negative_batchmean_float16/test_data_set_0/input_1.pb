
BinputJu¥¨<§»