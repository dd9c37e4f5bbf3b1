BoutputJ
î¿á?µ@Ý>YA