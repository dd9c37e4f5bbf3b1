
B
pos_weightJ
£9*<&>¢>lA