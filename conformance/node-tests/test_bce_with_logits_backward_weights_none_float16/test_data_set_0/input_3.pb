
BweightJ?3Z2󓟇