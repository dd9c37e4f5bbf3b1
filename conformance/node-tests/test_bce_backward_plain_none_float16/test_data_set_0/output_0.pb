
BoutputJ(à­ï¾á6vG5¹à»Y6Êƒ¾pA>tGã°¼­”;FMš._8š<