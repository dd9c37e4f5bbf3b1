
B
pos_weightJ୔55