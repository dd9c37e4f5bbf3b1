BoutputJ
Ò¿-@À¿z?à?