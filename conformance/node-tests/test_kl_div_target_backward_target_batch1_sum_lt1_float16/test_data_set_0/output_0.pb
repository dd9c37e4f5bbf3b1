
BoutputJ
K½îµÔ&O¤·