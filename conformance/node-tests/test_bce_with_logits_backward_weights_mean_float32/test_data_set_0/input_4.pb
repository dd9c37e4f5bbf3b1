B
pos_weightJ©‡1?Pü@¹>£?¯@K4?