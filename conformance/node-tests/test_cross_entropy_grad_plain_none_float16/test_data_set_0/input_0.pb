
Bgrad_outputJg=}5§¼ý±