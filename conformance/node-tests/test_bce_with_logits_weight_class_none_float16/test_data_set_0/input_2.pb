
BweightJ
c4C*9Â9¯: