B
pos_weightJç@ã@í
@ ?¥m…?