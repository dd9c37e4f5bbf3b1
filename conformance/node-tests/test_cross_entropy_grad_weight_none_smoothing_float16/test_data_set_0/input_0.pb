
Bgrad_outputJ<¼Â=Ö»>;