B
pos_weightJ!gÂ?—ç?RJW?