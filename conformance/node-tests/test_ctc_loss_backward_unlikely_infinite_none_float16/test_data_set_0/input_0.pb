
Bgrad_outputJ£¼F¸M¼	°