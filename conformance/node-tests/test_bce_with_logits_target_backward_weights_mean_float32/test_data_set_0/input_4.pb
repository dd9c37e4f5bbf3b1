B
pos_weightJÆ_¤?¸ž?ƒƒ%@3±;@zE3@