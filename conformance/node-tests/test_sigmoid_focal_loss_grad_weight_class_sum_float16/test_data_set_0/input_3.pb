
BweightJÆ96¥:[;36i0