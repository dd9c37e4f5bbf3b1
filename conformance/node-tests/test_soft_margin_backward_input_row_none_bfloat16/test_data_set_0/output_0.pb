BoutputJ
'?:>G>Ã==?