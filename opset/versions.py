"""Identity and version numbers of what lossops writes: one place for all of them."""

DOMAIN = "lossops"
VERSION = 1

# onnx 1.23 stamps IR 14, which onnxruntime 1.31 rejects; 10 loads everywhere we care about
# (onnxruntime >= 1.16, onnxruntime-cann 1.24, onnx >= 1.15).
IR_VERSION = 10

# Default-domain opset for models and function bodies: 19+ for Equal on strings (attribute dispatch in
# the generic functions); 21 is read by onnxruntime >= 1.18, onnxruntime-cann 1.24 and onnx >= 1.19.
ONNX_OPSET = 21
