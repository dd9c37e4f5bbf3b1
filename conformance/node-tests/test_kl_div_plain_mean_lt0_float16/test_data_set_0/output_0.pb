
BoutputJe2