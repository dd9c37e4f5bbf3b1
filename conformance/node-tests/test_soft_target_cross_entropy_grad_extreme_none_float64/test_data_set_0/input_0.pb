Bgrad_outputJAåŞò¸@–qç¼
ÿ¿