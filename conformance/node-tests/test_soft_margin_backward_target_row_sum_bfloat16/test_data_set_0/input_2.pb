BtargetJ
€¿€¿€¿€?€?