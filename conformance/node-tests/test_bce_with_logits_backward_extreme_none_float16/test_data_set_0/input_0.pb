
Bgrad_outputJ&¾ÿ<Ä=6¬b´±