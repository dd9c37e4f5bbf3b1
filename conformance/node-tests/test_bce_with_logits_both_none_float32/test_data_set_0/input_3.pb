B
pos_weightJ¤ü?¬?ëÀ@ß3@ÄJ$@