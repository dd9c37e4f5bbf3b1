
Bgrad_outputJñ¥∫@åªÅ=