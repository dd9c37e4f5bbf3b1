
B
pos_weightJo=a;h>