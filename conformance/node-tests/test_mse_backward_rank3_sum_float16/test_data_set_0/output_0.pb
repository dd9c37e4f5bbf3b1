
BoutputJ0M<LñÏ