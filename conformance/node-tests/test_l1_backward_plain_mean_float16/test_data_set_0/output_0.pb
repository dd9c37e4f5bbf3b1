
BoutputJ(s)s©s)s)s©s)s)s©s©s©s)s©s©s)s©s)s)s)s)s)