
Bgrad_outputJ‹¼‹´s-