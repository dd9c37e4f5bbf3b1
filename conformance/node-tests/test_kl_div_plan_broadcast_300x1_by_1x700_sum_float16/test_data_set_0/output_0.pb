
BoutputJ÷y