
BoutputJ(Ж=l9─?ь=AT?I8╫╤а@╬^Ad©Y╟l>(8кBа2Ъ╝▌бу<