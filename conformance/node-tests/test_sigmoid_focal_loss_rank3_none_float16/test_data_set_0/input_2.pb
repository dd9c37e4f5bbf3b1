
BweightJ򯧒𱄽