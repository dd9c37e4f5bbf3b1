BoutputJ
v½c½È½¾Ù½