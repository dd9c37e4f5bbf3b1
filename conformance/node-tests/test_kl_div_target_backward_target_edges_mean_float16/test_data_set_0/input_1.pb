
BinputJЁP╪2©╒╠><НаN╧