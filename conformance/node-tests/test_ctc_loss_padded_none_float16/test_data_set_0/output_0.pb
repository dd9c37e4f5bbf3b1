
BoutputJÿK'P-KKF