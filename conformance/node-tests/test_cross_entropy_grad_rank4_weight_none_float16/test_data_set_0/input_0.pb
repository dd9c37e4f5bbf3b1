
Bgrad_outputJ [4m=¯¹0Àz½Ã³Û?“8?=»A¸Tµ­<…¸¨´|>