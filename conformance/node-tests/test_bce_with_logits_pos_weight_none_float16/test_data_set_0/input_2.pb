
B
pos_weightJ
Ò<'<2@AÑA