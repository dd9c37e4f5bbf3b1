
B
pos_weightJ
.A	8.<ÕAn>