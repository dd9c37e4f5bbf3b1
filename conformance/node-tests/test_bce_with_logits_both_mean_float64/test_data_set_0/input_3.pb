B
pos_weightJ(æX…˜Õ[ô?0¸¥lÒ÷?„ì)B•Ñ@¯„VRð?ê˜8G®Ã@