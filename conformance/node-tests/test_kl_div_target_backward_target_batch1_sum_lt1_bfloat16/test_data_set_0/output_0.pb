BoutputJ
©¿¾¾Ú<¼â¾