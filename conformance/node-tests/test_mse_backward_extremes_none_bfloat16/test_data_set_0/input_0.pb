Bgrad_outputJ	?U¿º>ˆ?£=
½