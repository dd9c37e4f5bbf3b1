
B
pos_weightJ
Â;í=R<5Aç=