B
pos_weightJ
ý??@3@$@