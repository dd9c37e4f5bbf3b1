B
pos_weightJ?Lсы╩П?А╝V&Ь?NТ⌡■╚Ш?