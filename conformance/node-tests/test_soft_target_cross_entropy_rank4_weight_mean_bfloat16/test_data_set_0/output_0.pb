BoutputJ
@