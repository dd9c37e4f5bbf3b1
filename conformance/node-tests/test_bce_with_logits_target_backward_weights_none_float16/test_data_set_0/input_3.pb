
BweightJí:Á5Þ9•9