
B
pos_weightJ
´@A@@®8K>