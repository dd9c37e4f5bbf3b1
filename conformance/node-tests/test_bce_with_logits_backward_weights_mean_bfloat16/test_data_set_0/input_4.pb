B
pos_weightJ
ê?!@@@@