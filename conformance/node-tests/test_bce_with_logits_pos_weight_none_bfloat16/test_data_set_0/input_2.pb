B
pos_weightJ
š?…?@!@:@