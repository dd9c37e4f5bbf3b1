
BoutputJaKl@DI=