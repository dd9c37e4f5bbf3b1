BoutputJ
…¼½¾­½9<