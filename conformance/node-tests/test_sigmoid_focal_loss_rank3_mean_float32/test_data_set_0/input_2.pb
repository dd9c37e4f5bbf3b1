BweightJWŽ*?Æöd?
È>Òa>