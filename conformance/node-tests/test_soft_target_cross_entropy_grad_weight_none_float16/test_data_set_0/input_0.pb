
Bgrad_outputJQ=à¶ª¬ª´