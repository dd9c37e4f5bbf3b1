BoutputJşH;
@