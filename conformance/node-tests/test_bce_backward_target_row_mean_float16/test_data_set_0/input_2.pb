
BtargetJ
Z:À*Ð;ë8ƒ-