
BoutputJ( 0e ญ#ขtนY969e NธF3>ฏ8ษดิ*qฑ_นCณ-ฒ