
B
pos_weightJ
>ƒ<oA+<±<