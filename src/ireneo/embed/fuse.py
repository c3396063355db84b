"""Fewer, larger nodes in a BERT export, so that the 8-bit models embed a turn faster.

The MiniLM exports ireneo packages spell each layer out in small nodes: ~25 for attention
(reshapes, transposes, two products, a softmax, the mask arithmetic, a NaN guard from torch's
exporter) and five for Gelu, which cost much of a short turn's time (docs/models.md).
onnxruntime's transformer optimizer fuses Gelu and its bias into one node, and the common
spellings of attention, but not these; so attention is fused here. The query, key and value
projections are kept (8-bit quantization treats them as before), and what follows them, up to
the output projection, becomes one `MultiHeadAttention` (an onnxruntime operator).

Layers are found by the parameter names every Hugging Face BERT export keeps
(`….attention.self.query.bias`, `….attention.output.dense.bias`). A graph this does not
recognise, or whose fused outputs differ from its own, is left as it was (`fuse_layers`
returns False), so a model never runs a rewrite that changed what it computes.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np

log = logging.getLogger("ireneo.embed.fuse")

_PROJECTION = re.compile(
    r"^(?P<layer>.*\.attention\.)(?P<part>self\.query|self\.key|self\.value|output\.dense)\.bias$"
)
_AGREEMENT = 1e-4  # largest difference allowed between the fused and unfused token vectors


def fuse_layers(source: Path, target: Path, heads: int) -> bool:
    """Write `source` with each layer's attention and Gelu fused into `target`; False (and
    nothing written) when a layer is not recognised or the fused graph computes something else."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(source))
    graph = model.graph
    weights = {t.name for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    mask = next((i.name for i in graph.input if i.name == "attention_mask"), None)
    layers = _layers(graph, producer, weights)
    if mask is None or not layers:
        log.warning("the 8-bit build runs with its layers unfused (they were not recognised)")
        return False

    mask_int32 = "ireneo_attention_mask_int32"
    fused = [helper.make_node("Cast", [mask], [mask_int32], to=TensorProto.INT32)]
    rewired: dict[str, str] = {}
    for n, (query, key, value, context) in enumerate(layers):
        output = f"ireneo_attention_{n}"
        fused.append(
            helper.make_node(
                "MultiHeadAttention",
                [query, key, value, "", mask_int32],
                [output],
                domain="com.microsoft",
                num_heads=heads,
            )
        )
        rewired[context] = output
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in rewired:
                node.input[i] = rewired[name]

    # Whatever goes wrong from here (a graph onnxruntime refuses, outputs that differ), the
    # model still runs as exported: a faster graph is not worth a model that fails to load.
    try:
        nodes = _live(_in_order(list(graph.node) + fused, graph), graph)
        del graph.node[:]
        graph.node.extend(nodes)
        used = {name for node in nodes for name in node.input}
        kept = [t for t in graph.initializer if t.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
        if not any(opset.domain == "com.microsoft" for opset in model.opset_import):
            model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        onnx.save(model, str(target))
        _fuse_gelu(target)
        same = _agree(source, target)
        why = "its fused outputs differ"
    except Exception as error:
        same, why = False, f"{type(error).__name__}: {error}"
    if not same:
        # ~10% slower, and nothing else would show it: said once, when the model is built
        log.warning("the 8-bit build runs with its layers unfused (%s)", why)
        target.unlink(missing_ok=True)
    return same


def _fuse_gelu(path: Path) -> None:
    """Gelu and the bias before it as one BiasGelu, by onnxruntime's own two fusions (its
    transformer optimizer's whole pipeline would also run shape inference, which needs sympy)."""
    import onnx
    from onnxruntime.transformers.fusion_biasgelu import FusionBiasGelu
    from onnxruntime.transformers.fusion_gelu import FusionGelu
    from onnxruntime.transformers.onnx_model import OnnxModel

    model = OnnxModel(onnx.load(str(path)))
    FusionGelu(model).apply()
    FusionBiasGelu(model, is_fastgelu=False).apply()
    model.topological_sort()
    model.save_model_to_file(str(path))


def _layers(graph, producer, weights) -> list[tuple[str, str, str, str]]:
    """(query, key, value, context) tensor names of each layer, in graph order; [] when any
    layer's projections are not `MatMul(x, W) + bias` on one shared input."""
    projections: dict[str, dict[str, object]] = {}
    for node in graph.node:
        if node.op_type != "Add":
            continue
        for name in node.input:
            found = _PROJECTION.match(name)
            if found:
                projections.setdefault(found["layer"], {})[found["part"]] = node
    layers = []
    for parts in projections.values():
        if len(parts) != 4:
            return []
        inputs = {part: _matmul_input(add, producer, weights) for part, add in parts.items()}
        if None in inputs.values():
            return []
        if len({inputs["self.query"], inputs["self.key"], inputs["self.value"]}) != 1:
            return []
        q, k, v = (parts[p].output[0] for p in ("self.query", "self.key", "self.value"))
        layers.append((q, k, v, inputs["output.dense"]))
    return layers


def _matmul_input(add, producer, weights) -> str | None:
    """x, when `add` is `MatMul(x, W) + bias` with W and bias stored weights."""
    others = [name for name in add.input if name not in weights]
    matmul = producer.get(others[0]) if len(others) == 1 else None
    if matmul is None or matmul.op_type != "MatMul" or matmul.input[1] not in weights:
        return None
    return matmul.input[0]


def _in_order(nodes, graph):
    """`nodes` sorted so that each comes after the nodes that make its inputs."""
    ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    ordered, waiting = [], nodes
    while waiting:
        still = []
        for node in waiting:
            if all(name in ready for name in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                still.append(node)
        if len(still) == len(waiting):
            raise ValueError("the graph has a cycle or an input nothing makes")
        waiting = still
    return ordered


def _live(ordered, graph):
    """The nodes of `ordered` that the graph's outputs depend on."""
    needed = {o.name for o in graph.output}
    live = []
    for node in reversed(ordered):
        if any(name in needed for name in node.output):
            live.append(node)
            needed.update(node.input)
    return live[::-1]


def _agree(source: Path, target: Path) -> bool:
    """Both graphs give the same outputs for two texts of different lengths (one padded)."""
    import onnxruntime as ort

    runs = []
    for path in (source, target):
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        runs.append(session.run(None, _probe(session)))
    return all(
        a.shape == b.shape and float(np.max(np.abs(a - b), initial=0)) <= _AGREEMENT
        for a, b in zip(*runs, strict=True)
        if np.issubdtype(a.dtype, np.floating)
    )


def _probe(session) -> dict[str, np.ndarray]:
    ids = np.array([[101, *range(2000, 2030), 102], [101, *range(3000, 3010), 102, *[0] * 20]])
    mask = (ids != 0).astype(np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    return {
        i.name: feeds[i.name].astype(np.int32 if i.type == "tensor(int32)" else np.int64)
        for i in session.get_inputs()
    }
