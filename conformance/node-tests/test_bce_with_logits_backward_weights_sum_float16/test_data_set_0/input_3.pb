
BweightJB:Ú8S7-2