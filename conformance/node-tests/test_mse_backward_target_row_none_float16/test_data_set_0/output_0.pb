
BoutputJ(!Då$ô¹ICÑÂv¼«ì7@<u¼t8/B±kCô;ZÈ«5¥®Œ¾Ñ½