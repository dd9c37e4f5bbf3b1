B
pos_weightJP>O‘>(Ö >ÏG >