BweightJxð>‚=c
|?Ù«ù>