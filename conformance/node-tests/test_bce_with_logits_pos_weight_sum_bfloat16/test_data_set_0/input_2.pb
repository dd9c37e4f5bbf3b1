B
pos_weightJ
@@@?É?