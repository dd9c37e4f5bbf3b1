
BoutputJ ÝEÁBô<žA{:`>Ç<“=ÌCBAx?^??<?˜<m>