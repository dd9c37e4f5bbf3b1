BoutputJ
À¿$@Å?µÀ