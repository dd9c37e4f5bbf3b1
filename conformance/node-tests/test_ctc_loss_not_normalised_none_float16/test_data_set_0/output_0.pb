
BoutputJüÌÅxÉÆ