
Bgrad_outputJJ8¨ºÏ5@<-N¨