
Bgrad_outputJ <¹<¼¼<