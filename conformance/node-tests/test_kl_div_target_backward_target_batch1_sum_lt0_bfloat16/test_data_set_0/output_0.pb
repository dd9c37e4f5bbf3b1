BoutputJ
>A*AÍ¿Ë?ı@