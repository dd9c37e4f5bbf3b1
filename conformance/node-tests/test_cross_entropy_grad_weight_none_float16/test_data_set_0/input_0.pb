
Bgrad_outputJnµI³Æ8½