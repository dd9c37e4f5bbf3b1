BoutputJ
&½Ç½·<º½Ø=