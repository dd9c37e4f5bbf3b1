
Bgrad_outputJ•ºQ¾0³8