
Bgrad_outputJG3Ê<ô¨V¸aAú=Û:¼<‹=@Àj¸