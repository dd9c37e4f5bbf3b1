
Bgrad_outputJ»µÞ´Ÿ¼