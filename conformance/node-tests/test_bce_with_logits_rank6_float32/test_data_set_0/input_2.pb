B
pos_weightJúQÏ?ql÷?àp?