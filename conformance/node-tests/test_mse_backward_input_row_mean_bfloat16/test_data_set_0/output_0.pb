BoutputJ
>û½Ê¾÷¼r¿