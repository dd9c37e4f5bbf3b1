
BtargetJ
~ÀdÀÀË¾º