BweightJ
ã1?®‹=¯W>y8A>