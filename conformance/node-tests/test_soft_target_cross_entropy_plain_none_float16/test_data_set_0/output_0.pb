
BoutputJ§A5AÂ=Ò>