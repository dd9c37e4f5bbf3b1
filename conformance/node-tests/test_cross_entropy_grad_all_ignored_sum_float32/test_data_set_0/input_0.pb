Bgrad_outputJ¥%
?