
Bgrad_outputJ3‘,~º?¿Œ16½´>53O9ú:¼