B
pos_weightJä¢@±Ë?'?yü2@{#@