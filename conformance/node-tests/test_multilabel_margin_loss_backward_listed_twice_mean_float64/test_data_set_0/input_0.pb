Bgrad_outputJ
âÙ
¦Æ?