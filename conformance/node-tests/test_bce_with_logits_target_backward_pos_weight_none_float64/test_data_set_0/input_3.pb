B
pos_weightJ(แธ@ึýQซ”$เ?WQณ๗คน๐?hiสนR@Nฦ+ถ๙?