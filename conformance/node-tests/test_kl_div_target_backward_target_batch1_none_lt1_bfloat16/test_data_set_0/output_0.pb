BoutputJ
ù¿¾î¼=b¿