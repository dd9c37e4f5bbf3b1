
Bgrad_outputJ ‡>y·Wº[·ä5,w¸«·g8ï7X5¥»Ë#=ã¹ý>