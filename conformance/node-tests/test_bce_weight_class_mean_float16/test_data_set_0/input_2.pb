
BweightJ
񓐼;�6b;