
BoutputJ
@9Ï172.ë9