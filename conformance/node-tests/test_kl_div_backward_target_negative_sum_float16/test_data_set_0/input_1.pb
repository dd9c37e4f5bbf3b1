
BinputJ8<»¹·