BweightJ
Ì>P>P=Z>j?