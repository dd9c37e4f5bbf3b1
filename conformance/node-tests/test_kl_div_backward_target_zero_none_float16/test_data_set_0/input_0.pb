
Bgrad_outputJA8c·¿D´¾°Ð.