
BweightJ
ê1O7Y9:;ð: