Bgrad_outputJ
קהqִ#ט?