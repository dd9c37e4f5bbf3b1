
Bgrad_outputJL>�9»ɲ