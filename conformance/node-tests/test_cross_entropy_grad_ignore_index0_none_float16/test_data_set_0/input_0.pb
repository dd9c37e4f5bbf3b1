
Bgrad_outputJ‹³£:Å<‘½