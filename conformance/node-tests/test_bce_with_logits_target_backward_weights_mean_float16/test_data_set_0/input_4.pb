
B
pos_weightJ
#=ð<,AÞAšA