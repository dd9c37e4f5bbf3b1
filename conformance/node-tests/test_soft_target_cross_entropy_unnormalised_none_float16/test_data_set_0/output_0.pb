
BoutputJNãKŠG;L