B
pos_weightJ
@Ã?ù?3@#@