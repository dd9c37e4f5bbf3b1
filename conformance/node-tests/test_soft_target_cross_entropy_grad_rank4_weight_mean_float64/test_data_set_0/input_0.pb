Bgrad_outputJL/
c7Ìñ¿