B
pos_weightJ(I€”ÿ?0Eη®‘υα?bΛαWx@εΥ»a@Γχ~X‰@