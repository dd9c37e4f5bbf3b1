
BoutputJ(P4/=»;¼>a.E8Œ=¾Bì@&8z0À@Ö8b9…8,8w<r<Ë=v8