
Bgrad_outputJ:¸G»€¸Ø°