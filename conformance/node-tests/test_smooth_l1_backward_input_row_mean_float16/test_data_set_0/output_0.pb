
BoutputJ
1©8®­%Ï­½.