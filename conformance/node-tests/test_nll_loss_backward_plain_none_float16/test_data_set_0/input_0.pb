
Bgrad_outputJDÁß=€¬[À