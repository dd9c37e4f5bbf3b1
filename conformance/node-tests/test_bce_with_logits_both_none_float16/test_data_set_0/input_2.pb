
BweightJ󘅛(;�