
BoutputJäAL@î?@