BoutputJ
\?ß>'ÀC¿Q¿