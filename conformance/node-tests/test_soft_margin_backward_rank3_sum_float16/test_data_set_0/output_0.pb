
BoutputJ8¼1=¸