
Bgrad_outputJ9ö>