
BoutputJ ÊFZBA;…AÆ7C>ã<Œ<ÇC«AÈ?‡?:=?Œ<o>