
B
pos_weightJ/<
>ë>