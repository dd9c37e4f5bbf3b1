
BoutputJ‡´ú¶«6