BinputJ
€€€ÿ€ÿ€ÿ