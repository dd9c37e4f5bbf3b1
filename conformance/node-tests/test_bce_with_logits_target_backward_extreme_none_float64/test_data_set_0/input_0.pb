Bgrad_outputJ@­EìÌVhÒ?Gã>J" Ú¿@ÈÀ½IÍ¿€pÛá?eßJù8×?Ÿé3^¶Wó¿ãéj#oÙâ¿Şn
9z¼´¿