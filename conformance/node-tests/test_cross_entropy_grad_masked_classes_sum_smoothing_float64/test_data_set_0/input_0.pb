Bgrad_outputJ`žé•
¾Ç?