
Bgrad_outputJ6¾H9é½#=