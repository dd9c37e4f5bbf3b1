
Bgrad_outputJ‰¿µ²Lª_9ê<