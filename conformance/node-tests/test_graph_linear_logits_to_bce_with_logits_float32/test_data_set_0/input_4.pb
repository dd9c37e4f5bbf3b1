B
pos_weightJ‘ö@­Ç;@Ðl`?