
B
pos_weightJ{>»?‡;