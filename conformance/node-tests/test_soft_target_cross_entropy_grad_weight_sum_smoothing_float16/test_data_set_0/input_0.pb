
Bgrad_outputJy?