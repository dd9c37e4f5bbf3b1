
BoutputJ
µ´´%¸ý¹€¸