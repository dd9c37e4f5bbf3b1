
BtargetJ
%>$&º02