
Bgrad_outputJ39˜¹9…®