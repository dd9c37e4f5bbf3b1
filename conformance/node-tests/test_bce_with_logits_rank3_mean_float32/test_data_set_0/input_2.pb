B
pos_weightJ†?@\">1¸s?á>