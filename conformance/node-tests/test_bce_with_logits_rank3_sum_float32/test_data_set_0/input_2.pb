B
pos_weightJ²|?TÍ?g€>ßoÌ>