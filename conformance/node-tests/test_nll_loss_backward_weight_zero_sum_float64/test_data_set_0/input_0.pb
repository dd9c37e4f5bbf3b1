Bgrad_outputJÀþ
,Ôñ?