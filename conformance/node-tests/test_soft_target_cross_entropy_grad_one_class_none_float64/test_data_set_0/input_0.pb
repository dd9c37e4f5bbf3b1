Bgrad_outputJ=pªj
şÃ?¾yA-;ğ?Hû42l3ò?