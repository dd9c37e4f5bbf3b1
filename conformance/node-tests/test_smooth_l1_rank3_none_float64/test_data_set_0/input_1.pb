BtargetJ`NCKасїЮбinгҐу?Ќне¶z
хї