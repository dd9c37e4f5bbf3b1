BinputJ
8¿@3@"?T?