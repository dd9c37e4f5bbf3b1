B
pos_weightJMë­?&(l?q
Í?