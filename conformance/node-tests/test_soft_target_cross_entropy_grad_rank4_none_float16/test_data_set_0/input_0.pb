
Bgrad_outputJ y=ú:y+ª9q=þ5X¼É¬Ô¶^¾ÀÂ0.¼¡6gºm: