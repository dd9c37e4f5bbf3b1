
B
pos_weightJ
=õ=´A<ñA