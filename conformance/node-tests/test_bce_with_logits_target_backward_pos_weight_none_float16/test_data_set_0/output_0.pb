
BoutputJ(6E ÄpB+½C«¼+L¼ÄÈşDğ/]À¥ÄÃ3mÅ‚C©<1;d;î¤