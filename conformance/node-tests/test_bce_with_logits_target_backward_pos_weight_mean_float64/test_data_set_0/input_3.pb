B
pos_weightJ(´ø ¤ô@ú?|B-×›ò?¢ÿFX¼@Ï.v«ð?BÐxÅò?