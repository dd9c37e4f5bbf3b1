
B
pos_weightJ>8?º: