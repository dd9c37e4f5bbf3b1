B
pos_weightJоч┘?Я0а?║\щ?