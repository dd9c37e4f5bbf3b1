
B
pos_weightJ
@^>é<˜AA