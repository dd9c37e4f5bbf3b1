B
pos_weightJÔŽ‚•þ?ÐB˜›ÜÌÿ?xÎTD^ù?