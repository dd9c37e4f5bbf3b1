
BoutputJ>@