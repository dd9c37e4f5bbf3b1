BoutputJ
€€ÿ€ÿ€'|