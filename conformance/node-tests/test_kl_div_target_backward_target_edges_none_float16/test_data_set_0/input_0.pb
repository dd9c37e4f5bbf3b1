
Bgrad_outputJ>¬»’ºX²"¾8Ð½