
BoutputJöAéµ”¹