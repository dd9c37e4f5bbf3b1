
BinputJ(ë¶…¼d9n¼@e;Àµ8r>«Ac»C<$8y´^<8N<5¸™R6