
BoutputJùB