
BinputJí¼í8â9•¼E¹$­