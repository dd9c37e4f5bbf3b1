B
pos_weightJ??€>Ì>