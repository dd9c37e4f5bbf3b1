B
pos_weightJHљШ.фLј?явсвсќ?о^р?Jщъ?