
B
pos_weightJ‘81ž;ð0