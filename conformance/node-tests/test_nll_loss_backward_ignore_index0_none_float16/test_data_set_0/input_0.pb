
Bgrad_outputJÁ3m1›½À0