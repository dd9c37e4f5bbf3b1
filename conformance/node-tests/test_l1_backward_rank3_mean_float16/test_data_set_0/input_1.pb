
BinputJk¶ô¸“¹