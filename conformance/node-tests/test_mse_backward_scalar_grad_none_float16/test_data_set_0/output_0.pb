
BoutputJ(L;£6—<';B>˜ª¶µZ;oÀè;4¼€¶†¸4¶wA;P³L¼tÂ,6