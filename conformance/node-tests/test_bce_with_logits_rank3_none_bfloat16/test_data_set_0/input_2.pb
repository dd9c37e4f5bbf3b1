B
pos_weightJP>‘>¡> >