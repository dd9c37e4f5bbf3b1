
BweightJ
a)½4k;G:’"