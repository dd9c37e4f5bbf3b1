
B
pos_weightJ
Œ9p@=u@¢9