B
pos_weightJNZ}¨i½õ?h…>°…í?Â·N¡ù?