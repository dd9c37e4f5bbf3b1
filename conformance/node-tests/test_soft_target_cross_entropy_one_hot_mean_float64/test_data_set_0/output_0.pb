BoutputJ‘
§[û@