
Bgrad_outputJ Â³˜6¼ð°7´(»27f¾u´ï´E¤½z8¼¥¹C¼