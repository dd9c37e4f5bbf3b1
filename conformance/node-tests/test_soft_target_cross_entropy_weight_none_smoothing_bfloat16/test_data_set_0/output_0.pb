BoutputJ<@
@ş?@