
B
pos_weightJ
V<Y;ûA‰A<