
Bgrad_outputJ{<¾À¡6