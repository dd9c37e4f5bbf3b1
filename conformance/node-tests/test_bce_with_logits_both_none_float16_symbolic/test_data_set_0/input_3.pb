
B
pos_weightJ
å?}8^@˜A"A