Bgrad_outputJ,äh>nA™?WŒ½åµ
¿‡",@àJ¿?»o[?,q—?–c±?×ûÀœ?¿