
BoutputJ
öIVIWÇV?¨G