
Bgrad_outputJ·ç<	:İ9