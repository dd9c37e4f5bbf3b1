Bgrad_outputJ
?