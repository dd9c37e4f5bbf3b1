BtargetJ
€€ÿ€ÿ€ñ|