"""Every node of a model, wherever it sits: the main graph, the graphs nested in nodes' attributes (If branches,
Loop and Scan bodies, at any depth) and the model-local functions. The one walker every layer uses."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from onnx import GraphProto, ModelProto, NodeProto

from .versions import DOMAIN


def subgraphs(nodes: Iterable[NodeProto]) -> Iterator[GraphProto]:
    """Every graph nested in these nodes' attributes, at any depth."""
    for node in nodes:
        for a in node.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield g
                yield from subgraphs(g.node)


def graphs(graph: GraphProto) -> Iterator[GraphProto]:
    """`graph` and every graph nested in it."""
    yield graph
    yield from subgraphs(graph.node)


def nodes(body: Iterable[NodeProto]) -> Iterator[NodeProto]:
    """These nodes (a graph's or a function's) and every node of the graphs nested in them."""
    body = list(body)
    yield from body
    for g in subgraphs(body):
        yield from g.node


def model_nodes(model: ModelProto) -> Iterator[NodeProto]:
    """Every node of the model: its graph, nested graphs and model-local functions."""
    for body in [model.graph.node, *(f.node for f in model.functions)]:
        yield from nodes(body)


def lossops_nodes(model: ModelProto) -> Iterator[tuple[GraphProto, NodeProto]]:
    """Each lossops node of the model's graph and nested graphs (not of its functions), with its graph."""
    for g in graphs(model.graph):
        for node in g.node:
            if node.domain == DOMAIN:
                yield g, node
