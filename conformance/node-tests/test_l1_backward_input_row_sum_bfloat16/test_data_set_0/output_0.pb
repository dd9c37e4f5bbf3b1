BoutputJ
M@Í?M@Í?MÀ