
BoutputJ(X³VÄL<ªL‚¾ìÀï;šÏÄÌFƒC¨L¶ÁJ²½@˜R 4w=ÁA