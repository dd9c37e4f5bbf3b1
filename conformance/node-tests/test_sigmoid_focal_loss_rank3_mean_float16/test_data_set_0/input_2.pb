
BweightJT9(;@6#0