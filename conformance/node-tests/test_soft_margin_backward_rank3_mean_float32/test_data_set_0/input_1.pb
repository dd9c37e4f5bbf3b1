BinputJ¶q½…JØ¿í
‰¿