BoutputJ
×>h?p@@–¾