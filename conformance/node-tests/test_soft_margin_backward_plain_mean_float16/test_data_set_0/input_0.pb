
Bgrad_outputJÌ8