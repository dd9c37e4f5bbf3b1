
BoutputJ0e¤ý*Ž)i+Œœc¥'¤¹¤<•ð¤) t£y¤U('&¶’t š÷˜Úv¢wžs£