BoutputJ
ÿ>¹@
@‰?
Á