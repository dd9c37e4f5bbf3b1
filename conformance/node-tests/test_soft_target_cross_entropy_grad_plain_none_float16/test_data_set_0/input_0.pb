
Bgrad_outputJ³¿
Âž<@>