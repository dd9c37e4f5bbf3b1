BtargetJ
¡<ˆ<E¿>@>