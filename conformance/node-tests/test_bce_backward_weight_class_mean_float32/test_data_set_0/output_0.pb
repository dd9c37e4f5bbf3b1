BoutputJP–n»<Ë¼P2®¼ô‰´¾˜wg=^r-¼IT2½3y±¾±œ5=›9ñ=œCx<v´
¾ËÎ½nt.½S:3½Pí!<Å¤j>AVh<t•Ë½…•½