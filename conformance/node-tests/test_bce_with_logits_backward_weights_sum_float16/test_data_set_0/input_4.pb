
B
pos_weightJ
¶Aé:7?n:+: