
BoutputJ
´6=;{C\@¬´