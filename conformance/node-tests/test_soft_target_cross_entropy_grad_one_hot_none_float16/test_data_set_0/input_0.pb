
Bgrad_outputJ“59»p»m4