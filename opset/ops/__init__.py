"""One module per operator, named for it in snake case: its record (`DEFINITION`, an `OpDef`: inputs and their
shape rules, attributes, output, gradients, aclnn and aten names) and its decomposition's formula. The registry
(`opset/registry.py`) discovers them here."""
