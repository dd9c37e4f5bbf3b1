BoutputJêº
;¿};J'o<