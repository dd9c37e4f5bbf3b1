Bgrad_outputJ"À
?Õ?3¿