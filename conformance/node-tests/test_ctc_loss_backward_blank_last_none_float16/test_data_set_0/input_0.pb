
Bgrad_outputJâ/<±™I6