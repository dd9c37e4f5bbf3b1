
BoutputJúÅ”HoÍ