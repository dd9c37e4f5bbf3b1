
Bgrad_outputJğ1