
BoutputJì9