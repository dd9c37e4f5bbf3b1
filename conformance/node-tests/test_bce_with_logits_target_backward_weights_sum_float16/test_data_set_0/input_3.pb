
BweightJ򚍏8�