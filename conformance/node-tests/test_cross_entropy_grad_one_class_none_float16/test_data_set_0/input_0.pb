
Bgrad_outputJ<4Ú&PÀ