B
pos_weightJn3š?¬Þ„?K@Ï @õ/:@