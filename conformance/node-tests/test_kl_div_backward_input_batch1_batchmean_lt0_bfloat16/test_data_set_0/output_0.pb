BoutputJ
Œ>>ä>$?÷>