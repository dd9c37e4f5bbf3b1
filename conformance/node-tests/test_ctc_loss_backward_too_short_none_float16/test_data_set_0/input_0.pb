
Bgrad_outputJю<;?зн■▒