B
pos_weightJ?">t?>