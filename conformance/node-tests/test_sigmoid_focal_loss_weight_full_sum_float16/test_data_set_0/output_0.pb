
BoutputJ`D