
Bgrad_outputJ‡¸ú>«2