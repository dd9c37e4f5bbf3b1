BweightJ
?…>‡>”>È=