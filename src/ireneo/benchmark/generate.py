"""Synthetic histories for the recall benchmark: one user's year of maintenance chats.

`generate(N)` builds N conversations of six messages (user and assistant alternating). Each hides
exactly one checkable fact among small talk: a ticket number, a quality-check reject rate, a task
owner or a decision reference. The distractors are deliberate:

- every piece of equipment recurs in about six conversations (two facts, four mentions in small
  talk), every site in about as many, so their numbers grow with N;
- the same twelve people, task types and symptoms recur everywhere;
- near-identical facts about different equipment exist (the same symptom on three compressors,
  each with its own ticket), so a query has to match a combination, not one rare word.

The fact sits early, midway or late in a conversation, and in one of five it is split over two
turns (the user names the problem, the assistant asks, the user gives the number). An owner is a
full name; the reject rates and names that questions ask about occur in one conversation only.

Questions are paraphrased (the fact says "Ticket MT-1040 is open", the question asks for the work
order raised for the seal leak on pump P-003), each in a long natural form and a short agent-style
form; half name the equipment id, half only its site and kind (a combination that is unique: a
site has at most one machine of each kind). Every question's answer string occurs in its own
conversation and in no other; `generate` checks this on the text it produced.

The world (equipment, sites, facts, which facts are asked about) depends only on N and the seed;
the language ("en", "ru", "ko") and the template family ("A" for development, "B" held out:
other phrasings, other questions, other small talk; "C", which nobody tunes on: other shapes of
conversation too) only change the words. The words are data files (`ireneo.benchmark.templates`).
Same arguments, same bytes.
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import json
import random
import re
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ireneo.benchmark import templates
from ireneo.benchmark.templates import FACT_KINDS, FAMILIES, LANGS, Language
from ireneo.formats import funes_jsonl
from ireneo.model import Block, Turn

HARNESS = "bench"

# Equipment kinds and their id prefixes. No prefix ends with another prefix, and ids of one
# history share one number width, so no id is a substring of another.
EQUIPMENT_KINDS = {
    "pump": "P",
    "compressor": "K",
    "chiller": "CH",
    "conveyor": "CV",
    "mixer": "MX",
    "fan": "FN",
    "extruder": "EX",
    "gearbox": "GB",
}
_ALL = tuple(EQUIPMENT_KINDS)
_SEALED = ("pump", "compressor", "chiller", "mixer", "extruder", "gearbox")
_BELTED = ("conveyor", "fan", "mixer", "compressor")

# The facts' attributes, with the kinds of equipment each one makes sense for.
SYMPTOMS = {
    "vibration": _ALL,
    "seal_leak": _SEALED,
    "bearing_hot": _ALL,
    "overcurrent": _ALL,
    "oil_leak": _SEALED,
    "startup_noise": _ALL,
    "pressure_drop": ("pump", "compressor", "chiller", "fan", "extruder"),
    "high_temp": _ALL,
    "sensor_drift": _ALL,
    "no_restart": _ALL,
    "belt_slip": _BELTED,
    "drive_fault": _ALL,
}
TASKS = {
    "bearing_swap": _ALL,
    "seal_swap": _SEALED,
    "alignment": _ALL,
    "oil_change": _SEALED,
    "vibration_survey": _ALL,
    "filter_change": ("pump", "compressor", "chiller", "fan"),
    "belt_swap": _BELTED,
    "motor_rewind": _ALL,
    "sensor_calibration": _ALL,
    "coupling_check": _ALL,
    "firmware_update": _ALL,
    "safety_inspection": _ALL,
}
PRODUCTS = {
    key: _ALL
    for key in (
        "gaskets",
        "housings",
        "brackets",
        "caps",
        "pellets",
        "fittings",
        "end_caps",
        "bushings",
        "cartridges",
        "glands",
    )
}
TOPICS = {
    key: _ALL
    for key in (
        "replace_not_repair",
        "quarterly_pm",
        "synthetic_oil",
        "spare_motor",
        "defer_overhaul",
        "vibration_sensor",
        "reduced_speed",
        "vendor_rebuild",
        "firmware",
        "retire",
    )
}
ATTRIBUTES = {"ticket": SYMPTOMS, "reject_rate": PRODUCTS, "owner": TASKS, "decision": TOPICS}
VOCAB_OF = {"ticket": "symptom", "reject_rate": "product", "owner": "task", "decision": "topic"}

PEOPLE = 12  # the recurring colleagues; every language file names exactly twelve
ROSTER = 800  # task owners: every language file can name this many different people
SITE_STEMS, SITE_TYPES = 60, 6  # site names: stem x type (x a number once those run out)
RESERVED = {"reject_rate": 400, "owner": 300}  # unique answers set aside for asked-about facts

EPOCH = datetime(2025, 11, 3, tzinfo=UTC)  # a Monday; the history spans the next 365 days
_HOUR_WEIGHTS = (0, 0, 0, 0, 0, 1, 3, 6, 9, 9, 8, 7, 5, 7, 8, 8, 7, 5, 3, 2, 2, 1, 0, 0)
_UUID_NS = uuid.UUID("6f1d1f9e-5b7a-4c61-9a55-4e1f2b0d6a31")

# The shapes of a conversation and the roles of its parts (kept with the templates they use).
PATTERNS = templates.SHAPES
_FACT_PARTS = templates.FACT_PARTS
_LAST_PARTS = templates.LAST_PARTS


@dataclass(frozen=True)
class Question:
    id: str
    long: str  # the paraphrased natural question
    short: str  # agent-style short query
    answer: str  # occurs verbatim in the right conversation's text, and in no other
    session_id: str  # the right conversation
    kind: str  # "ticket" | "reject_rate" | "owner" | "decision"
    names_id: bool  # does the question name the equipment id?


@dataclass(frozen=True)
class Fact:
    """The one fact a conversation hides (kept for diagnostics and tests)."""

    session_id: str
    kind: str
    equipment: str  # its id, e.g. "P-003"
    equipment_kind: str  # "pump", "compressor", ...
    site: str  # the site's name as the language writes it
    attribute: str  # the symptom, task, product or decision topic (a key, not text)
    answer: str


@dataclass
class History:
    turns: list[Turn]
    questions: list[Question]
    facts: list[Fact] = field(default_factory=list)
    # equipment id -> (site name, kind): the whole plant, including what is only small talk
    equipment: dict[str, tuple[str, str]] = field(default_factory=dict)
    lang: str = "en"
    family: str = "A"
    seed: int = 0


# ---------------------------------------------------------------------------------------------
# The world: who, what, where and which fact sits in which conversation. No words yet.


@dataclass
class _Conv:
    fact_kind: str
    eq: int
    attr: str
    value: str | int = ""  # ticket/decision id, reject rate in hundredths, owner index
    others: tuple[int, ...] = ()  # equipment mentioned in small talk
    spare_ticket: str | None = None  # an unrelated ticket number mentioned in passing
    spare_decision: str | None = None
    start: datetime = EPOCH
    names_id: bool = True  # if asked about: by id (True) or by site and kind


@dataclass
class _World:
    eq_ids: list[str]
    eq_kind: list[str]
    eq_site: list[int]
    site_codes: list[int]
    convs: list[_Conv]
    ranking: dict[str, list[int]]  # per fact kind: conversations in the order they are asked
    reserved: dict[str, int]  # per fact kind: how many of the ranking have unique answers


def _id_width(count: int, base_digits: int) -> int:
    width = base_digits
    while count > 0.7 * (10**width - 10 ** (width - 1)):
        width += 1
    return width


def _build_world(n: int, seed: int) -> _World:
    rng = random.Random(f"ireneo.bench/world/{seed}/{n}")
    kinds = list(EQUIPMENT_KINDS)

    # Sites hold one to three machines of different kinds (so "the pump at <site>" is unique).
    n_eq = max(4, round(n / 2))
    eq_kind: list[str] = []
    eq_site: list[int] = []
    n_sites = 0
    while len(eq_kind) < n_eq:
        for kind in rng.sample(kinds, rng.choice((1, 2, 2, 3))):
            if len(eq_kind) < n_eq:
                eq_kind.append(kind)
                eq_site.append(n_sites)
        n_sites += 1
    site_codes = rng.sample(range(max(2 * n_sites, SITE_STEMS * SITE_TYPES)), n_sites)

    per_kind = {k: eq_kind.count(k) for k in kinds}
    width = 3
    while max(per_kind.values()) > 0.75 * 10**width:
        width += 1
    numbers = {k: iter(rng.sample(range(1, 10**width), per_kind[k])) for k in kinds}
    eq_ids = [f"{EQUIPMENT_KINDS[k]}-{next(numbers[k]):0{width}d}" for k in eq_kind]

    # Facts: two per machine, the four kinds equally often, no (machine, kind, attribute) twice.
    fact_eq = [e for e in range(n_eq) for _ in range(2)]
    rng.shuffle(fact_eq)
    while len(fact_eq) < n:
        fact_eq.append(rng.randrange(n_eq))
    fact_eq = fact_eq[:n]
    fact_kinds = [FACT_KINDS[i % 4] for i in range(n)]
    rng.shuffle(fact_kinds)
    used: set[tuple[int, str, str]] = set()
    convs: list[_Conv] = []
    for i in range(n):
        e = fact_eq[i]
        order = [fact_kinds[i]] + [k for k in FACT_KINDS if k != fact_kinds[i]]
        for fk in order:
            options = [a for a, ok in ATTRIBUTES[fk].items() if eq_kind[e] in ok]
            options = [a for a in options if (e, fk, a) not in used]
            if options:
                attr = rng.choice(options)
                used.add((e, fk, attr))
                convs.append(_Conv(fact_kind=fk, eq=e, attr=attr))
                break
        else:  # pragma: no cover - needs dozens of facts on one machine
            raise RuntimeError("ran out of distinct facts for one machine")

    # Small talk: every machine mentioned about four more times, never twice in one conversation.
    pool = list(range(n_eq)) * 4
    rng.shuffle(pool)
    for i, conv in enumerate(convs):
        picked: list[int] = []
        for j in (2 * i, 2 * i + 1):
            cand = pool[j] if j < len(pool) else rng.randrange(n_eq)
            while cand == conv.eq or cand in picked:
                cand = rng.randrange(n_eq)
            picked.append(cand)
        conv.others = tuple(picked)

    # Ids for tickets and decisions: unique across the history, one width, so never nested.
    spare_t = [rng.random() < 0.3 for _ in convs]
    spare_d = [rng.random() < 0.15 for _ in convs]
    for prefix, fact_kind, spare in (("MT", "ticket", spare_t), ("DR", "decision", spare_d)):
        facts = [c for c in convs if c.fact_kind == fact_kind]
        count = len(facts) + sum(spare)
        width = _id_width(count, 4)
        ids = iter(f"{prefix}-{x}" for x in rng.sample(range(10 ** (width - 1), 10**width), count))
        for c in facts:
            c.value = next(ids)
        for c, flag in zip(convs, spare, strict=True):
            if flag:
                if prefix == "MT":
                    c.spare_ticket = next(ids)
                else:
                    c.spare_decision = next(ids)

    # Which facts get asked about, in order: those with near-identical siblings (same kind of
    # fact, same attribute, same kind of machine, another machine) first.
    clusters: dict[tuple[str, str, str], int] = {}
    for c in convs:
        key = (c.fact_kind, eq_kind[c.eq], c.attr)
        clusters[key] = clusters.get(key, 0) + 1
    ranking: dict[str, list[int]] = {}
    reserved: dict[str, int] = {}
    for fk in FACT_KINDS:
        members = [i for i, c in enumerate(convs) if c.fact_kind == fk]
        rng.shuffle(members)
        members.sort(key=lambda i: clusters[(fk, eq_kind[convs[i].eq], convs[i].attr)] < 2)
        ranking[fk] = members
        for rank, i in enumerate(members):
            convs[i].names_id = rank % 2 == 0
        reserved[fk] = min(len(members), RESERVED.get(fk, len(members)))

    # Reject rates (hundredths of a percent, all below 10%) and owners: the asked-about facts
    # get values nobody else has; the rest share the remaining values.
    rates = list(range(20, 990, 10)) + [h for h in range(11, 1000) if h % 10]
    for fk, values in (("reject_rate", rates), ("owner", list(range(ROSTER)))):
        members = ranking[fk]
        unique = rng.sample(values, reserved[fk])
        taken = set(unique)
        rest = [v for v in values if v not in taken]
        for rank, i in enumerate(members):
            convs[i].value = unique[rank] if rank < reserved[fk] else rng.choice(rest)

    # Dates: spread over a year, mostly working hours, in conversation order.
    starts = sorted(
        EPOCH
        + timedelta(
            days=rng.randrange(365),
            hours=rng.choices(range(24), weights=_HOUR_WEIGHTS)[0],
            seconds=rng.randrange(3600),
        )
        for _ in convs
    )
    for conv, start in zip(convs, starts, strict=True):
        conv.start = start
    return _World(eq_ids, eq_kind, eq_site, site_codes, convs, ranking, reserved)


# ---------------------------------------------------------------------------------------------
# Words: the template files (`ireneo.benchmark.templates`) and the filler.

_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]+))?\}")


_VOCABULARY = tuple((VOCAB_OF[k], tuple(ATTRIBUTES[k])) for k in FACT_KINDS)


def load_language(lang: str) -> Language:
    """One language's shared words and rules (`templates/<lang>.json`), checked."""
    return templates.load_language(lang, tuple(EQUIPMENT_KINDS))


def load_family(lang: str, family: str) -> dict:
    """One template family of one language (`templates/<lang>-<family>.json`), checked."""
    return templates.load_family(lang, family, _VOCABULARY, tuple(EQUIPMENT_KINDS))


class _Filler:
    """Fills `{slot}` and `{slot:form}` templates.

    A slot's value is a string or a dict of forms ("" is the plain one; Russian has cases,
    English "a" for the article). A form the value does not have goes to the language's `modify`
    (Korean attaches particles: `{eq:이/가}`). A slot spelled with a capital is capitalised.
    """

    def __init__(self, language: Language):
        self.modify = language.modify
        self._parsed: dict[str, list[str | tuple[str, str | None, bool]]] = {}

    def parse(self, template: str) -> list[str | tuple[str, str | None, bool]]:
        parsed = self._parsed.get(template)
        if parsed is None:
            parsed = []
            pos = 0
            for m in _SLOT.finditer(template):
                if m.start() > pos:
                    parsed.append(template[pos : m.start()])
                name = m.group(1)
                parsed.append((name.lower(), m.group(2), name[0].isupper()))
                pos = m.end()
            if pos < len(template):
                parsed.append(template[pos:])
            self._parsed[template] = parsed
        return parsed

    def __call__(self, template: str, slots: dict) -> str:
        out = []
        for piece in self.parse(template):
            if isinstance(piece, str):
                out.append(piece)
                continue
            name, form, cap = piece
            value = slots[name]
            if isinstance(value, dict):
                if form is not None and form in value:
                    text, form = value[form], None
                else:
                    text = value[""]
            else:
                text = value
            if form is not None:
                text = self.modify(text, form)
            if cap:
                text = text[:1].upper() + text[1:]
            out.append(text)
        return "".join(out)

    def forms(self, variant: str | dict, slots: dict) -> str | dict:
        """A target phrase: one template, or one template per grammatical case."""
        if isinstance(variant, str):
            return self(variant, slots)
        return {case: self(tpl, slots) for case, tpl in variant.items()}


def _plain(value: str | dict) -> str:
    return value if isinstance(value, str) else value[""]


class _Writer:
    """Writes one language and template family over a world."""

    def __init__(self, world: _World, lang: str, family: str):
        self.world = world
        self.family = family
        self.language = load_language(lang)
        self.fam = load_family(lang, family)
        self.fill = _Filler(self.language)
        self.sites = {code: self.language.site_name(code) for code in world.site_codes}
        self.people = self.language.people
        self.vocab = self.fam["vocab"]
        self.shapes = list(self.fam.get("shapes", templates.DEFAULT_WEIGHTS).items())

    # -- values -------------------------------------------------------------------------------

    def site_of(self, e: int) -> str | dict:
        return self.sites[self.world.site_codes[self.world.eq_site[e]]]

    def answer(self, conv: _Conv) -> str:
        if conv.fact_kind == "reject_rate":
            return self.language.rate(int(conv.value))
        if conv.fact_kind == "owner":
            return _plain(self.language.owner(int(conv.value)))
        return str(conv.value)

    def attr_entry(self, conv: _Conv) -> dict:
        return self.vocab[VOCAB_OF[conv.fact_kind]][conv.attr]

    # -- conversations ------------------------------------------------------------------------

    def conversation(self, conv: _Conv, rng: random.Random) -> list[str]:
        w = self.world
        fam = self.fam
        p1, p2 = rng.sample(self.people, 2)
        others = conv.others
        slots = {
            "eq": w.eq_ids[conv.eq],
            "kind": self.language.kinds[w.eq_kind[conv.eq]],
            "site": self.site_of(conv.eq),
            "attr": rng.choice(self.attr_entry(conv)["fact"]),
            "ans": self.answer(conv),
            "owner": self.language.owner(int(conv.value)) if conv.fact_kind == "owner" else "",
            "p1": p1,
            "p2": p2,
            "day": rng.choice(self.language.days),
            "site2": self.site_of(others[-1]),
            "mt": conv.spare_ticket or "",
            "dr": conv.spare_decision or "",
        }
        names = [name for name, _ in self.shapes]
        pattern = rng.choices(names, weights=[weight for _, weight in self.shapes])[0]
        shape = PATTERNS[pattern]
        chatter = 0
        used: set[str] = set()  # no sentence twice in one conversation
        messages: list[list[tuple[str, bool, str]]] = []
        had_followup = False
        for m, parts in enumerate(shape):
            user = m % 2 == 0
            sentences: list[tuple[str, bool, str]] = []  # (text, essential, part)
            included_followup = False
            for spec in parts:
                name = spec.rstrip("?!")
                if spec.endswith("?") and rng.random() < 0.5:
                    continue
                if spec.endswith("!") and not had_followup:
                    continue
                if name in ("chatter", "a_chatter"):
                    if name == "chatter":
                        chatter += 1
                    other = others[min(max(chatter, 1), len(others)) - 1]
                    slots["oeq"] = w.eq_ids[other]
                    slots["okind"] = self.language.kinds[w.eq_kind[other]]
                    slots["osite"] = self.site_of(other)
                pool = fam[name]
                if isinstance(pool, dict):  # a kinded part: templates per kind of fact
                    pool = pool[conv.fact_kind]
                essential = name in _FACT_PARTS or name == "chatter"
                sentences.append((self.fill(_pick(pool, used, rng), slots), essential, name))
                included_followup |= name == "followup"
            if user:
                had_followup = included_followup
            messages.append(sentences)

        # Unrelated ticket and decision numbers go into a user message without the fact.
        spare = []
        if conv.spare_ticket:
            spare.append(self.fill(rng.choice(fam["spare_ticket"]), slots))
        if conv.spare_decision:
            spare.append(self.fill(rng.choice(fam["spare_decision"]), slots))
        if spare:
            free = [
                m
                for m in range(0, 6, 2)
                if not any(p.rstrip("?!") in _FACT_PARTS for p in shape[m])
            ]
            target = messages[free[-1]]
            at = max(len(target) - 1, 1)  # before the message's last sentence, if it has two
            target[at:at] = [(text, True, "spare") for text in spare]

        texts = []
        joiner = self.language.joiner
        low, high = self.language.words
        for m, sentences in enumerate(messages):
            filler = "small" if m % 2 == 0 else "a_offer"
            words = _words(sentences)
            while words < low:
                # before the closing lines (a goodbye, a question waiting for its answer)
                at = len(sentences)
                while at > 0 and sentences[at - 1][2] in _LAST_PARTS:
                    at -= 1
                text = self.fill(_pick(fam[filler], used, rng), slots)
                sentences.insert(at, (text, False, filler))
                words += len(text.split())
            while words > high:
                drop = next(
                    (k for k in range(len(sentences) - 1, -1, -1) if not sentences[k][1]), None
                )
                if drop is None:
                    break
                words -= len(sentences.pop(drop)[0].split())
            texts.append(joiner.join(text for text, _, _ in sentences))
        return texts

    # -- questions ----------------------------------------------------------------------------

    def question(self, conv: _Conv, rng: random.Random) -> tuple[str, str]:
        w = self.world
        fam = self.fam
        entry = self.attr_entry(conv)
        kind = w.eq_kind[conv.eq]
        synonyms = fam.get("question_kinds")  # a family may name a kind otherwise in questions
        base = {
            "eq": w.eq_ids[conv.eq],
            "kind": rng.choice(synonyms[kind]) if synonyms else self.language.kinds[kind],
            "site": self.site_of(conv.eq),
        }
        how = "id" if conv.names_id else "site"
        slots = {
            "target": self.fill.forms(rng.choice(fam[f"target_{how}"]), base),
            "target_s": self.fill.forms(rng.choice(fam[f"short_{how}"]), base),
            "attr": rng.choice(entry["q"]),
            "attr_s": rng.choice(entry["short"]),
        }
        long = self.fill(rng.choice(fam["q_long"][conv.fact_kind]), slots)
        short = self.fill(rng.choice(fam["q_short"][conv.fact_kind]), slots)
        return long, short


def _uuid5(name: str) -> str:
    """`str(uuid.uuid5(_UUID_NS, name))`, without building UUID objects (60,000 of them)."""
    h = hashlib.sha1(_UUID_NS.bytes + name.encode()).hexdigest()
    variant = "89ab"[int(h[16], 16) & 3]
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


def _pick(pool: list[str], used: set[str], rng: random.Random) -> str:
    """A random template from `pool`, one not used yet in this conversation if there is one."""
    for _ in range(4):
        template = rng.choice(pool)
        if template not in used:
            break
    used.add(template)
    return template


def _words(sentences: list[tuple[str, bool, str]]) -> int:
    return sum(len(text.split()) for text, _, _ in sentences)


# ---------------------------------------------------------------------------------------------
# The API.


def generate(
    conversations: int,
    *,
    lang: str = "en",
    family: str = "A",
    seed: int = 0,
    questions: int = 100,
) -> History:
    """One user's synthetic history of `conversations` chats, with `questions` questions.

    Questions come a quarter of each kind, interleaved; at most one per conversation, so a small
    history may get fewer than asked for (so may more than about 1,200 questions, once the unique
    reject rates and owner names set aside for them run out). Raises ValueError on a bad
    argument, RuntimeError if an answer set aside as unique is not (a bug in a template).
    """
    if conversations < 1:
        raise ValueError("conversations must be at least 1")
    if questions < 0:
        raise ValueError("questions must not be negative")
    if family not in FAMILIES:
        raise ValueError(f"unknown template family {family!r}: use one of {', '.join(FAMILIES)}")
    load_language(lang)
    load_family(lang, family)
    world = _build_world(conversations, seed)
    writer = _Writer(world, lang, family)
    rng = random.Random(f"ireneo.bench/text/{seed}/{conversations}/{lang}/{family}")
    width = max(5, len(str(conversations - 1)))
    session_ids = [f"{lang}{family}-{i:0{width}d}" for i in range(conversations)]

    turns: list[Turn] = []
    joined: list[str] = []
    facts: list[Fact] = []
    for i, conv in enumerate(world.convs):
        sid = session_ids[i]
        texts = writer.conversation(conv, rng)
        ts = conv.start
        for seq, text in enumerate(texts):
            if seq:
                ts += timedelta(seconds=rng.randrange(25, 420))
            turns.append(
                Turn(
                    session_id=sid,
                    turn_uuid=_uuid5(f"{seed}/{sid}/{seq}"),
                    seq=seq,
                    ts=ts,
                    role="user" if seq % 2 == 0 else "assistant",
                    harness=HARNESS,
                    blocks=(Block("text", text),),
                )
            )
        joined.append("\n".join(texts))
        facts.append(
            Fact(
                session_id=sid,
                kind=conv.fact_kind,
                equipment=world.eq_ids[conv.eq],
                equipment_kind=world.eq_kind[conv.eq],
                site=_plain(writer.site_of(conv.eq)),
                attribute=conv.attr,
                answer=writer.answer(conv),
            )
        )

    # Pick the questions, checking on the text itself that each answer is in its own
    # conversation and in no other.
    corpus = _Corpus(joined)
    quota = [questions // 4 + (1 if k < questions % 4 else 0) for k in range(4)]
    quota = [min(q, conversations) for q in quota]
    chosen: dict[str, list[int]] = {}
    for fk, want in zip(FACT_KINDS, quota, strict=True):
        picked: list[int] = []
        for rank, i in enumerate(world.ranking[fk]):
            if len(picked) >= want:
                break
            if corpus.unique_to(facts[i].answer, i):
                picked.append(i)
            elif rank < world.reserved[fk]:
                raise RuntimeError(
                    f"answer {facts[i].answer!r} of {session_ids[i]} is not unique to it "
                    f"({lang}/{family}, seed {seed}): a template or the generator is wrong"
                )
        chosen[fk] = picked

    out: list[Question] = []
    for r in range(max((len(v) for v in chosen.values()), default=0)):
        for fk in FACT_KINDS:
            if r < len(chosen[fk]):
                i = chosen[fk][r]
                conv = world.convs[i]
                qrng = random.Random(f"ireneo.bench/question/{seed}/{lang}/{family}/{i}")
                long, short = writer.question(conv, qrng)
                out.append(
                    Question(
                        id=f"q{len(out):04d}",
                        long=long,
                        short=short,
                        answer=facts[i].answer,
                        session_id=session_ids[i],
                        kind=fk,
                        names_id=conv.names_id,
                    )
                )
    equipment = {
        world.eq_ids[e]: (_plain(writer.site_of(e)), world.eq_kind[e])
        for e in range(len(world.eq_ids))
    }
    return History(turns, out, facts, equipment, lang, family, seed)


class _Corpus:
    """In which conversations a string occurs (as a substring, exactly).

    A needle with a digit and no white space (a ticket id, a rate) can only occur inside one
    white-space-delimited word that has a digit: those words' substrings of the needle's length
    are indexed once per length, so checking a thousand answers costs about as much as one.
    Anything else (a person's name) is searched for in the joined text.
    """

    _HAS_DIGIT = re.compile(r"\d").search

    def __init__(self, texts: list[str]):
        self.texts = texts
        self._joined: str | None = None
        self._starts: list[int] = []
        self._digit_words: dict[str, list[int]] | None = None
        self._by_length: dict[int, dict[str, int]] = {}

    def unique_to(self, needle: str, index: int) -> bool:
        """Does `needle` occur in conversation `index` and in no other?"""
        if any(ch.isdigit() for ch in needle) and not any(ch.isspace() for ch in needle):
            return self._substrings(len(needle)).get(needle) == index
        if self._joined is None:
            pos = 0
            for text in self.texts:
                self._starts.append(pos)
                pos += len(text) + 1
            self._joined = "\x00".join(self.texts)
        found = False
        pos = self._joined.find(needle)
        while pos != -1:
            if bisect.bisect_right(self._starts, pos) - 1 != index:
                return False
            found = True
            pos = self._joined.find(needle, pos + 1)
        return found

    def _substrings(self, length: int) -> dict[str, int]:
        """Every `length`-long piece of a word with a digit -> its conversation (-1: several)."""
        table = self._by_length.get(length)
        if table is not None:
            return table
        if self._digit_words is None:
            self._digit_words = {}
            for i, text in enumerate(self.texts):
                for word in filter(self._HAS_DIGIT, text.split()):
                    where = self._digit_words.setdefault(word, [])
                    if not where or where[-1] != i:
                        where.append(i)
        table = {}
        for word, where in self._digit_words.items():
            for start in range(len(word) - length + 1):
                piece = word[start : start + length]
                for i in where:
                    seen = table.setdefault(piece, i)
                    if seen != i:
                        table[piece] = -1
                        break
        self._by_length[length] = table
        return table


_FILE_PATTERN = re.compile(r"history-\d+\.funes\.jsonl")


def write_funes_jsonl(history: History, directory: Path, *, per_file: int = 100) -> list[Path]:
    """Write the history as `history-NNNN.funes.jsonl` files of `per_file` conversations each.

    Files of that name left in `directory` by an earlier, larger history are removed, so the
    directory holds exactly this history. Returns the files in order.
    """
    if per_file < 1:
        raise ValueError("per_file must be at least 1")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    sessions: list[list[Turn]] = []
    last = None
    for turn in history.turns:
        if turn.session_id != last:
            sessions.append([])
            last = turn.session_id
        sessions[-1].append(turn)
    chunks = [sessions[i : i + per_file] for i in range(0, len(sessions), per_file)]
    width = max(4, len(str(len(chunks) - 1)))
    paths = []
    for k, chunk in enumerate(chunks):
        path = directory / f"history-{k:0{width}d}.funes.jsonl"
        lines = [
            json.dumps(funes_jsonl.to_record(t), ensure_ascii=False, separators=(",", ":"))
            for session in chunk
            for t in session
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8", newline="\n")
        paths.append(path)
    keep = {p.name for p in paths}
    for stale in sorted(directory.iterdir()):
        if _FILE_PATTERN.fullmatch(stale.name) and stale.name not in keep:
            stale.unlink()
    return paths


def write_questions(history: History, path: Path) -> None:
    """Write the questions as a JSON list of objects (the fields of `Question`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = [asdict(q) for q in history.questions]
    path.write_text(
        json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8", newline="\n"
    )


# ---------------------------------------------------------------------------------------------
# Command line: python -m ireneo.benchmark.generate --conversations N --out DIR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ireneo.benchmark.generate",
        description="Write a synthetic history (.funes.jsonl) and its questions (questions.json).",
    )
    parser.add_argument("--conversations", "-n", type=int, required=True)
    parser.add_argument("--lang", choices=LANGS, default="en")
    parser.add_argument("--family", choices=FAMILIES, default="A")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--per-file", type=int, default=100)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    history = generate(
        args.conversations,
        lang=args.lang,
        family=args.family,
        seed=args.seed,
        questions=args.questions,
    )
    paths = write_funes_jsonl(history, args.out, per_file=args.per_file)
    write_questions(history, args.out / "questions.json")
    elapsed = time.perf_counter() - started
    print(
        f"{args.conversations} conversations ({len(history.turns)} turns) in {len(paths)} files "
        f"and {len(history.questions)} questions -> {args.out} "
        f"[{args.lang}/{args.family}, seed {args.seed}, {elapsed:.1f} s]",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
