
BoutputJù¶pC¼.åE§ aª5¼Â8ØE´Ý.