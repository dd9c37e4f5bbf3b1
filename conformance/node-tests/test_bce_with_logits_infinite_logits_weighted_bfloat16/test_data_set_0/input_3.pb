B
pos_weightJ@@@@@@@@@@@@@@@@