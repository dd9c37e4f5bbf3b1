
Bgrad_outputJg=