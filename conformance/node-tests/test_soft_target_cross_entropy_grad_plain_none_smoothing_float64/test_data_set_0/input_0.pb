Bgrad_outputJ eßJù8×?Ÿé3^¶Wó¿ãéj#oÙâ¿Şn
9z¼´¿