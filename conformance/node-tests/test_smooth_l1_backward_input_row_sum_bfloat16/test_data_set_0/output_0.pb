BoutputJ
ˆ?#@¿@1À