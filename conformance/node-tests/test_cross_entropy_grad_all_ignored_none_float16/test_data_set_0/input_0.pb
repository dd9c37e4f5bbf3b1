
Bgrad_outputJûº4¨a½