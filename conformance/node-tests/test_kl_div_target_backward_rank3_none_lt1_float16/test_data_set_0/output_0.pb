
BoutputJÈÄ8EÄ&½õÁ÷HøEhF1íÀèDH°ÇcA»¸