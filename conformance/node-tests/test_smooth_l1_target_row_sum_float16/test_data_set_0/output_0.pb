
BoutputJ!J