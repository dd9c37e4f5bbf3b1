B
pos_weightJ­Þ¢?û“¾?ªŒ6@‘b€?r>@