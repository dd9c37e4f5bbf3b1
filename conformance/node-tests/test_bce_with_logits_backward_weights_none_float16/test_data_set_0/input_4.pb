
B
pos_weightJ
v=¾A¼?g=·<