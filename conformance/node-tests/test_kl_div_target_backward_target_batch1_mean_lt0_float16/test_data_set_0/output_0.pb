
BoutputJ
ยน(น7ฏfท