
BoutputJ(DãC¿µ¿ı<j@å¶¦DY@i:Ø:+=3@ÜD@:i´[D7;xCƒC