
BtargetJx¼é<C½