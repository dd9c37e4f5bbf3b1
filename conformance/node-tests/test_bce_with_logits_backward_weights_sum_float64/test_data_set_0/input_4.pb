B
pos_weightJ(нціТ…€?I…п|/@Rѓt1Dф?JАz«:@t3Ц≥3Ґъ?