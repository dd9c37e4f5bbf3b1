BoutputJ
F½5½ ½ç½®½