
B
pos_weightJ
ò?L@=ÏA©>