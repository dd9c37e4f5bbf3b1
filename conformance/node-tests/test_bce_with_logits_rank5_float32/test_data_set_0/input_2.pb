B
pos_weightJ¬ô?åfþ?#òÊ?