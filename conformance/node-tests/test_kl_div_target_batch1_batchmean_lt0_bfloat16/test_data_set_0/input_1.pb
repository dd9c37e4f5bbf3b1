BtargetJ
f=ð>*>º;›>