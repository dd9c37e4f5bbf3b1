BoutputJ
h>P½’>M¾–>