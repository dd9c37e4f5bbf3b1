BoutputJVÒ£¾Lp–¾Â¡¿Â‚?¿
¿