
BoutputJ†£††«