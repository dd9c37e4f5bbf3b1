
Bgrad_outputJ„4g,8;¬>J¬