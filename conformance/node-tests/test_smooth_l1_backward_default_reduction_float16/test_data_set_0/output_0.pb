
BoutputJ(É¥fªf*fªf*O*i¤sžf*f*í¨f*‰(fª=$i&f*fªï¦f*