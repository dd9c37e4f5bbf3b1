
B
pos_weightJ¥?ó?X>