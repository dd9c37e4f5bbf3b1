
Bgrad_outputJ(>C9‚¥=∑¡7ùπrª≥7Ì@‡≥r∏ØºWΩ38Œ:≥ R5k/p0æ