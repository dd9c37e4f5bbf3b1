
BweightJD8(49k5;ş6