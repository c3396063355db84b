"""`ireneo demo` end to end (a real server, real posts, real MCP calls with real tokens), and the
packaging: the Dockerfile's install in a fresh virtual environment, and the demo run there."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import venv
from pathlib import Path

import pytest
from click.testing import CliRunner

from ireneo.config import Settings
from ireneo.demo import QUESTIONS, demo, find_data, load_conversations

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def demo_json() -> dict:
    result = CliRunner().invoke(demo, ["--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def answers(document: dict, user: str, starts: str) -> str:
    [question] = [
        q for q in document["questions"] if q["user"] == user and q["question"].startswith(starts)
    ]
    return "\n".join(recall["answer"] for recall in question["recalls"])


def test_demo_posts_every_turn_and_every_check_passes(demo_json):
    conversations = load_conversations(find_data())
    assert {c["user"] for c in conversations} == {"alice", "bob"}
    assert [c["user"] for c in conversations].count("alice") == 6
    turns = sum(len(c["turns"]) for c in conversations)
    assert demo_json["conversations"] == 7
    assert demo_json["posts"] == turns  # one post after every turn
    assert demo_json["turns_stored"] == turns  # each post adds exactly the new turn
    assert [q["ok"] for q in demo_json["questions"]] == [True] * len(QUESTIONS)
    assert demo_json["ok"] is True
    assert demo_json["seconds"] < 60


def test_the_n11_answer_has_the_decision_and_its_blocker(demo_json):
    text = answers(demo_json, "alice", "What did we decide about the N-11")
    assert "go ahead with the N-11 upgrade" in text
    assert "MT-4471" in text and "K-2" in text
    assert "2,185 of 2,400 units/d" in text


def test_the_forecast_answer_has_the_exact_numbers(demo_json):
    text = answers(demo_json, "alice", "Which forecast case")
    for fact in ("hyperbolic", "q0 1,500 units/d", "Di 0.25/yr", "b 0.6", "1,069.5 units/d"):
        assert fact in text
    assert "693.3 k units" in text and "exponential" in text


def test_alice_never_sees_bobs_chat_and_bob_does(demo_json):
    alice = answers(demo_json, "alice", "Did I ever discuss motor P-7")
    assert "P-7" not in alice and "MT-5120" not in alice and "South hub" not in alice
    assert "[1] " in alice  # she gets her own closest passages (K-2, MT-4471), not nothing
    bob = answers(demo_json, "bob", "Did I ever discuss motor P-7")
    assert "MT-5120" in bob and "P-7" in bob and "South hub" in bob
    assert "MT-4471" not in bob and "N-11" not in bob
    everything_alice_got = "\n".join(
        recall["answer"]
        for q in demo_json["questions"]
        if q["user"] == "alice"
        for recall in q["recalls"]
    )
    assert "MT-5120" not in everything_alice_got and "P-7" not in everything_alice_got


def test_the_narrated_demo_prints_what_the_agent_receives():
    result = CliRunner().invoke(demo, [])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "gateway: 48 posts" in out
    assert "recall_my_conversations('N-11 upgrade decision') as alice" in out
    assert "Decision recorded: go ahead with the N-11 upgrade." in out
    assert "✓ nothing of another user's" in out
    assert "all checks passed" in out


def test_a_missing_data_directory_says_what_to_do(tmp_path):
    result = CliRunner().invoke(demo, ["--data", str(tmp_path)])
    assert result.exit_code == 1
    assert "pass --data DIR" in result.output
    (tmp_path / "x.json").write_text('{"user": "alice", "turns": []}')
    result = CliRunner().invoke(demo, ["--data", str(tmp_path)])
    assert result.exit_code == 1
    assert "x.json is not a POST /turns body: conversation_id: is required" in result.output


# -- packaging: what the Dockerfile does, in a fresh virtual environment ------------------------


IMAGE_INSTALL = "-c requirements/lock.txt '.[e5,ko,postgres]'"  # the core, e5, Korean, PostgreSQL


def dockerfile_copies() -> list[str]:
    """The sources of the Dockerfile's COPY lines (what the image's install can see)."""
    sources = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("COPY "):
            *names, _target = shlex.split(line)[1:]
            sources += names
    return sources


def test_the_dockerfile_runs_as_a_user_offline_on_a_volume():
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("#") and "\nFROM python:3.11-slim\n" in text
    assert re.search(r"^USER app$", text, re.M)
    assert "HF_HUB_OFFLINE=1" in text and "IRENEO_HOME=/data" in text
    assert "\nVOLUME /data\n" in text
    assert 'CMD ["ireneo", "serve", "--host", "0.0.0.0"]' in text
    assert f"RUN pip install --no-cache-dir {IMAGE_INSTALL}" in text
    assert dockerfile_copies() == ["pyproject.toml", "README.md", "requirements", "src", "examples"]


def test_compose_sets_only_settings_the_server_reads():
    compose = (ROOT / "compose.yaml").read_text()
    names = set(re.findall(r"^\s+(IRENEO_[A-Z_]+):", compose, re.M))
    assert {"IRENEO_INGEST_KEY", "IRENEO_JWT_ISSUER", "IRENEO_JWT_AUDIENCE"} <= names
    assert {"IRENEO_JWKS_URL", "IRENEO_JWT_PUBLIC_KEY", "IRENEO_JWT_SECRET"} <= names
    read = set(Settings.variables())
    assert names <= read, names - read
    assert "- memories:/data" in compose


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_the_image_install_in_a_fresh_venv_has_no_torch_and_runs_the_demo(tmp_path):
    """The Dockerfile's `pip install` of exactly what it copies, in a new venv (pip may use its
    cache): the CLI starts, the model loads offline, torch and CUDA stay out, the demo passes."""
    app = tmp_path / "app"
    app.mkdir()
    for name in dockerfile_copies():
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(
                source, app / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
            )
        else:
            shutil.copy2(source, app / name)
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IRENEO_", "PYTHON"))}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"

    def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
        done = subprocess.run(
            args, cwd=app, env=env, capture_output=True, text=True, check=False, **kwargs
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done

    run(str(python), "-m", "pip", "install", "--quiet", *shlex.split(IMAGE_INSTALL))
    assert "Usage: ireneo" in run(str(env_dir / "bin" / "ireneo"), "--help").stdout

    installed = json.loads(run(str(python), "-m", "pip", "list", "--format=json").stdout)
    names = {package["name"].lower() for package in installed}
    heavy = {n for n in names if n in ("torch", "triton", "tensorflow", "onnxruntime-gpu")}
    heavy |= {n for n in names if n.startswith(("nvidia-", "cuda-"))}
    assert not heavy, heavy

    # at run time: no model hub, no proxy that works, and still everything answers
    env.update(
        HF_HUB_OFFLINE="1",
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
    )
    run(  # both models, as the image's build loads them
        str(python),
        "-c",
        "from ireneo.embed import load_embedder; load_embedder().embed_query('warm up'); "
        "load_embedder('e5-small-q8').embed_query('warm up')",
    )
    done = run(str(python), "-c", "from ireneo.demo import demo; demo()", "--json", timeout=120)
    document = json.loads(done.stdout)
    assert document["ok"] is True and document["seconds"] < 60
