BoutputJ
€?>¥¼U<«>