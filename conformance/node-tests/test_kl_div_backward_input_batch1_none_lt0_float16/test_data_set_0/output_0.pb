
BoutputJ
,³·ª‹²ó:O¬