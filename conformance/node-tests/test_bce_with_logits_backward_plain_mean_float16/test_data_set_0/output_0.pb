
BoutputJ('˜l¹‹Ž
}!b¡ž¡lV Q›I– Ñß’yh!u€›7