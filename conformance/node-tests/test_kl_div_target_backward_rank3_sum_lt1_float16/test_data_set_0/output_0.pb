
BoutputJ(AÎFC²A.gDú>v@#E	ChDÖEj@H