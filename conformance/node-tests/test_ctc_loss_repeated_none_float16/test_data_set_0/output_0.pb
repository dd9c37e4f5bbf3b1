
BoutputJIL®LìI×;