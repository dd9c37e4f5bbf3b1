BweightJ
Î>—>Y?ÿ=<?