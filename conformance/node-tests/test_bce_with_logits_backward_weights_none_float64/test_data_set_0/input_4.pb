B
pos_weightJ(І ЗLЂ„х?с3v+eц@І©ЇQною?uяLЪх?ЃА’i№т?