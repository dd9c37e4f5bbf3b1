
BoutputJ@Â