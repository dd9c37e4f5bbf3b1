
BoutputJ(fªf*fªfªf*fªfªf*f*f*fªf*f*fªf*fªfªfªfªfª