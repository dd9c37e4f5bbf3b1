Bgrad_outputJJ„?;—?
¢‚¿Ù{—?