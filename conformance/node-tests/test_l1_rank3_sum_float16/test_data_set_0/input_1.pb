
BtargetJÀË»b=