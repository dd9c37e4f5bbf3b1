
BweightJ¹:2/Õ8«7