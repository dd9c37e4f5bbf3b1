
B
pos_weightJ
<§9b<ñ>)A