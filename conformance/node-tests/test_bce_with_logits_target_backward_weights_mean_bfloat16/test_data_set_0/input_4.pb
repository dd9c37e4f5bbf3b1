B
pos_weightJ
¤?ž?&@<@3@