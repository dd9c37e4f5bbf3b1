
BoutputJ
B3Ÿª4v²±4