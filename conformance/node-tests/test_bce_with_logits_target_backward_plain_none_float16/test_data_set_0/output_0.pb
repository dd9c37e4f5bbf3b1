
BoutputJ(@ÈpB0½Cv¶B¬¼ÎÈE§@À¥Äv7¹Âs8±Aâ:5Ž«