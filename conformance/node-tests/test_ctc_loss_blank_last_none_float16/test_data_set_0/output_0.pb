
BoutputJ L;NˆI„E