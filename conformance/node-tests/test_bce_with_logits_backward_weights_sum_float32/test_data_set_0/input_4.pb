B
pos_weightJ–Lþ?ç{	@Œ!¢?îÐ9@žÕ?