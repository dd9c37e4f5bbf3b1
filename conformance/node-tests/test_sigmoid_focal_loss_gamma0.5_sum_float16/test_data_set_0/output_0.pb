
BoutputJ¥J