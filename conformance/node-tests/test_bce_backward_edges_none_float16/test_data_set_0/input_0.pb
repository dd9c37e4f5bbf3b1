
Bgrad_outputJž´d<”½Ý6»Ê·L&