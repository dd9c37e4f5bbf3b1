BoutputJ
¾”½¾”½>