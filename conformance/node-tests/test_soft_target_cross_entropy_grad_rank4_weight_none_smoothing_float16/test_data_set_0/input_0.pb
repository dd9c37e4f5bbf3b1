
Bgrad_outputJ ð3í;¼»=P.U7#:¸>ü®¦9v4Ù½i¼h½Œ«95