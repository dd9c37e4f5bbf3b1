
Bgrad_outputJŒ9"¶K½