
BinputJZ6º½L<