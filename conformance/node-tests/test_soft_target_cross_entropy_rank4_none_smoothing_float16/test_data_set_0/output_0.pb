
BoutputJ ~Cr@ý;kA'<Š=œ=\AfAf?#@?x=Î@à=ëC