
Bgrad_outputJü5/6µ