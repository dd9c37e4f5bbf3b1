BoutputJ
€€ÿ€ÿ€‹}