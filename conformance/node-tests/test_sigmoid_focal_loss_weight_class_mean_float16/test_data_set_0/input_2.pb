
BweightJ5Û9Ω8Ú;ù/°: