BinputJ
¸>Á?å¿Ø?B½