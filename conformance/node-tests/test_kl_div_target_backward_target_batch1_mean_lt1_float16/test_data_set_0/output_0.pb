
BoutputJ
]°ã¨ —×©