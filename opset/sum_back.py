"""The sum back of a gradient: from the broadcast shape down to an input's shape, over the axes broadcasting
added to or stretched in that input, with every axis static where the graph's shapes allow (what consumers such
as OpenVINO and tract need), for the backward decompositions whose input broadcasts (Builder.decomposition)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onnx import TensorProto

if TYPE_CHECKING:  # the builder applies the sum back (Builder.decomposition)
    from .builder import Builder


def sum_to_shape_of(b: Builder, d: str, input: str, shapes: list[tuple | None]) -> str:
    """Sum `d` (over F, the broadcast shape) down to `input`'s shape: over the axes that broadcasting added or
    stretched. `shapes`: what the graph says of input's and the other operands' shapes. Where they decide the
    axes, or at least the ranks, every axis is static; otherwise they are computed (Shape/NonZero). float32
    sums accumulate in float64, as the kernels."""
    # The sum keeps its axes; squeezing the ones broadcasting added leaves input's shape. (A Reshape to input's
    # shape would read a 0 in it as "copy this dim": an empty input then failed.)
    axes = _static_axes(*shapes)
    if axes == []:
        return d
    wide = b.compute != TensorProto.DOUBLE
    if wide:
        d = b.op("Cast", d, to=TensorProto.DOUBLE)
    if axes is not None:
        summed = b.summed(d, axes, 1)
        added = max(len(s) for s in shapes) - len(shapes[0])
        if added:
            summed = b.op("Squeeze", summed, b.ints(list(range(added))))
    elif all(s is not None for s in shapes):
        summed = _sum_by_rank(b, d, input, shapes)
    else:
        shape_d, shape_x = b.op("Shape", d), b.op("Shape", input)
        one = b.ints([1])
        padded_x = b.padded(shape_x, b.size(shape_d))
        mask = b.op("And", b.op("Equal", padded_x, one), b.op("Not", b.op("Equal", shape_d, one)))
        axes_found = b.op("Reshape", b.op("NonZero", mask), b.ints([-1]))
        # summed over a leading axis of 1 as well, so the axes are never empty: onnxruntime 1.24's ReduceSum
        # reduced every axis of an empty tensor despite noop_with_empty_axes (measured with onnxruntime-cann)
        axes = b.op("Concat", b.ints([0]), b.op("Add", axes_found, b.ints([1])), axis=0)
        summed = b.op("ReduceSum", b.op("Unsqueeze", d, b.ints([0])), axes, keepdims=1)
        added = b.op("Sub", b.size(shape_d), b.size(shape_x))  # and the leading axis of 1: never empty
        summed = b.op("Squeeze", summed, b.op("Range", b.int_scalar(0), b.op("Add", added, b.int_scalar(1)),
                                              b.int_scalar(1)))
    return b.op("Cast", summed, to=b.compute) if wide else summed


def _sum_by_rank(b: Builder, d: str, input: str, shapes: list[tuple]) -> str:
    """The sum back where the ranks are known but a dim of input is symbolic (1 or the broadcast extent: only
    the run knows), with every ReduceSum axis static (consumers such as OpenVINO and tract need that; tract
    computed a wrong shape from axes found at run time): the added axes are summed away; a symbolic axis is
    summed with keepdims and, where input's extent is not 1, the sum is not taken (Where); a final Slice to
    input's extents keeps one copy of each sum."""
    x = shapes[0]
    added = max(len(s) for s in shapes) - len(x)
    if added:
        d = b.op("ReduceSum", d, b.ints(list(range(added))), keepdims=0)
    others = [(1,) * (len(x) - len(o)) + tuple(o) if len(o) < len(x) else tuple(o[len(o) - len(x):])
              for o in shapes[1:]]
    shape_x, symbolic = None, []
    for k, extent in enumerate(x):
        column = [o[k] for o in others]
        if extent == 1 and any(c != 1 for c in column):  # stretched (where F's extent is 1 too, the sum is a copy)
            d = b.op("ReduceSum", d, b.ints([k]), keepdims=1)
        elif not isinstance(extent, int) and any(c != 1 and c != extent for c in column):
            shape_x = shape_x or b.op("Shape", input)
            # extent < 2 rather than == 1 (0 only where F's is 0 too): tract decides an Equal of a symbolic dim
            # and 1 when it loads the model, as false, and leaves a Less to the run
            is_one = b.op("Less", b.op("Slice", shape_x, b.ints([k]), b.ints([k + 1])), b.ints([2]))
            d = b.op("Where", is_one, b.op("ReduceSum", d, b.ints([k]), keepdims=1), d)
            symbolic.append(k)
    if symbolic:
        d = b.op("Slice", d, b.ints([0] * len(symbolic)), b.op("Gather", shape_x, b.ints(symbolic)),
                 b.ints(symbolic))
    return d


def _static_axes(x: tuple | None, *others: tuple | None) -> list[int] | None:
    """The axes to sum over, decided from the shapes alone (dims may be symbolic), or None if that needs the
    run-time shapes. An input axis is summed where it has extent 1 and the broadcast shape does not."""
    if x is None or any(o is None for o in others):
        return None
    rank = max(len(x), *(len(o) for o in others))
    x = (1,) * (rank - len(x)) + tuple(x)
    others = [(1,) * (rank - len(o)) + tuple(o) for o in others]
    axes = []
    for k in range(rank):
        column = [o[k] for o in others]
        if k < rank - len(x) or (x[k] == 1 and any(isinstance(c, int) and c != 1 for c in column)):
            axes.append(k)  # an axis broadcasting added, or one it stretched
        elif x[k] == 1 and all(c == 1 for c in column):
            continue
        elif isinstance(x[k], int) and x[k] != 1:
            continue  # input's extent is the broadcast one
        elif isinstance(x[k], str) and all(c == 1 or c == x[k] for c in column):
            continue  # the same symbolic dim, or 1: nothing stretched
        else:
            return None
    return axes
