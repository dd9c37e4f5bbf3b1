BoutputJ
€€ÿ€ÿ€Q}