
BweightJè9],Ω2
2