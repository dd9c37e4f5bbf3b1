BtargetJ
+¿ê¿ƒÀJÀ©¿