
Bgrad_outputJ Š<x3y4Ì0ì</½µ<ƒ9o¸É˜%·™+†;o¹ò9‡;