
BweightJ€7D(à;Í7