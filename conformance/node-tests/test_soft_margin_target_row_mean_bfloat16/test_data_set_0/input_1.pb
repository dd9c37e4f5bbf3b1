BtargetJ
€¿€¿€?€¿€?