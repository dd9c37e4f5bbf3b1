BtargetJ
˜>!<T?â=k=