
Bgrad_outputJ£¶!¼õ@r@