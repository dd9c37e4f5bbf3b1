
BoutputJÀ±ÑÅ‘Á•A-H«EdÈD¾þAX> ¡cº