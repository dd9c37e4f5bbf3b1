
B
pos_weightJ
ƒ<Ab@–@&@