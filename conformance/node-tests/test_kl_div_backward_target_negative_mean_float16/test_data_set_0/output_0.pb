
BoutputJрвррк