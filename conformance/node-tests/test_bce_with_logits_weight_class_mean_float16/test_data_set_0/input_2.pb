
BweightJ
m6¹4Ç:÷/Þ9