
BoutputJ
Ë=/="»!3q;