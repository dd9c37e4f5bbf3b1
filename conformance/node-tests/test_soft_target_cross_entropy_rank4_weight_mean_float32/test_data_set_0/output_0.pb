BoutputJ]
@