
Bgrad_outputJบ%ตส1