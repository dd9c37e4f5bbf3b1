
BoutputJ
P­â¬M°6²¬°