
BweightJo=a;h>