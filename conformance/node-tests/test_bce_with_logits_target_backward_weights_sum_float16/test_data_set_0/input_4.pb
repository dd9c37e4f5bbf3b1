
B
pos_weightJ
l9)<.8\9Ø<