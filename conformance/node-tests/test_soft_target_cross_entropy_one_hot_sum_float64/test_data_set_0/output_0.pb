BoutputJ‘
§[û8@