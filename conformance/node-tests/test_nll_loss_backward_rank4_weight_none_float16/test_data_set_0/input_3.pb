
BweightJù6Ø<Ω=