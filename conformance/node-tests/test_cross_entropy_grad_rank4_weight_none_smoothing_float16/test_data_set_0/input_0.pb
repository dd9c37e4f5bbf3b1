
Bgrad_outputJ ×·d4šA€Á†:Q:…=l16Ú>(\/C¬.6Þ>‘»