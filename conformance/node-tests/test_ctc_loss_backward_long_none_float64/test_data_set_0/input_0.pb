Bgrad_outputJÄ'á¨X-ò¿Ì2#
H,Ò¿zb…şÍµ?