"""The benchmark's words, read from data files beside this module, and checked as they are read.

`<lang>.json` holds a language's nouns, sites, names and days; `<lang>-<family>.json` a template
family: the sentences a conversation is made of (parts), the questions, and the vocabulary of
symptoms, tasks, products and decisions. Templates have slots, `{eq}` or `{kind:prep}` (see
`generate._Filler`). A file that lacks a field, has a field of the wrong shape, or a template
missing a slot its part needs (a fact without its answer) raises `TemplateError`, naming the file
and the field. The rules of each language (cases, particles, how a site or a person is named) are
the small classes at the end.

A vocabulary entry says its attribute three ways: "fact" (as a conversation does), "q" (as a long
question paraphrases it) and "short" (an agent's query), each in the grammatical form its slot
needs. English: a symptom's fact is a clause, a decision's a verb phrase ("we decided to ..."),
the rest noun phrases. Russian: a symptom's q in the genitive ("из-за ..."), a task's fact and q
in the accusative, products in the genitive plural ("партия ..."), a decision's fact an
infinitive and its q with the preposition ("о переходе ..."). Korean: noun phrases that take
particles; a decision's fact ends in 기로 ("...하기로 했어요").
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
LANGS = ("en", "ru", "ko")
FAMILIES = ("A", "B", "C")
FACT_KINDS = ("ticket", "reject_rate", "owner", "decision")

# A conversation is one of these shapes: six messages, user first; each message is a list of
# parts. "x?" is included half the time; "x!" only if the user's message before included a
# "followup" (an assistant answers a follow-up only when there was one). A family picks shapes
# by weight ("shapes" in its file; these weights if it has none).
SHAPES = {
    "early": (
        ("greet?", "fact", "followup"),
        ("ack", "advice?", "a_followup"),
        ("small", "small?", "chatter"),
        ("a_chatter", "a_small?"),
        ("chatter", "small?", "close?"),
        ("a_close",),
    ),
    "middle": (
        ("greet", "small", "small?"),
        ("a_small", "a_offer?"),
        ("chatter", "fact", "followup?"),
        ("ack", "advice?", "a_followup!"),
        ("small?", "chatter", "close"),
        ("a_chatter", "a_close"),
    ),
    "late": (
        ("greet", "chatter", "small?"),
        ("a_chatter", "a_offer?"),
        ("small", "chatter", "small?"),
        ("a_chatter", "a_small?"),
        ("late", "fact", "followup?"),
        ("ack", "advice?", "a_followup!", "a_close"),
    ),
    "split": (
        ("greet", "chatter", "small?"),
        ("a_chatter", "a_offer?"),
        ("split_problem",),
        ("split_ask",),
        ("split_answer", "chatter", "close?"),
        ("ack", "advice?", "a_close"),
    ),
    # The answer first ("note MT-1234 for me"), what it is about only after the assistant asks.
    "lead": (
        ("greet?", "lead_answer"),
        ("lead_ask",),
        ("lead_context", "chatter", "small?"),
        ("ack", "a_chatter"),
        ("small", "followup?", "close?"),
        ("a_followup!", "a_close"),
    ),
    # The problem and the site first, the machine and the answer once the assistant asks which.
    "thread": (
        ("greet?", "thread_problem"),
        ("thread_ask",),
        ("thread_machine", "followup?"),
        ("ack", "a_followup!"),
        ("small", "chatter", "close?"),
        ("a_chatter", "a_close"),
    ),
    # A pasted handover note: the fact between two lines about other machines.
    "note": (
        ("greet?", "note_intro", "chatter", "fact", "chatter"),
        ("ack", "a_chatter", "advice?"),
        ("small", "small?"),
        ("a_small", "a_offer?"),
        ("small?", "close"),
        ("a_close",),
    ),
}
DEFAULT_WEIGHTS = {"early": 25, "middle": 30, "late": 25, "split": 20}

# Parts by role. Kinded parts have templates per fact kind. Fact parts carry the fact (never
# dropped to shorten a message; no unrelated number goes into their message); last parts stay
# at the end of their message (a goodbye, a question waiting for its answer).
KINDED_PARTS = (
    "fact",
    "ack",
    "advice",
    "split_problem",
    "split_ask",
    "split_answer",
    "lead_answer",
    "lead_ask",
    "lead_context",
    "thread_problem",
    "thread_machine",
    "q_long",
    "q_short",
)
FACT_PARTS = (
    "fact",
    "split_problem",
    "split_answer",
    "lead_answer",
    "lead_context",
    "thread_problem",
    "thread_machine",
)
LAST_PARTS = ("close", "a_close", "split_ask", "followup", "a_followup", "lead_ask", "thread_ask")
# Parts every family has, whatever its shapes: fillers, unrelated numbers and the questions.
ALWAYS = (
    "small",
    "a_offer",
    "spare_ticket",
    "spare_decision",
    "target_id",
    "target_site",
    "short_id",
    "short_site",
    "q_long",
    "q_short",
)
_TARGETS = ("target_id", "target_site", "short_id", "short_site")
_QUESTIONS = ("q_long", "q_short")
_ANSWER = "{answer}"  # in the rules below: "ans", or "owner" for an owner fact

# Slots a part must have (required) and must not have (forbidden); any part may have only the
# slots in _CONVERSATION_SLOTS (plus those of _EXTRA_SLOTS), targets and questions their own.
_REQUIRED = {
    "fact": {"eq", "kind", "site", "attr", _ANSWER},
    "split_problem": {"eq", "kind", "site", "attr"},
    "split_answer": {_ANSWER},
    "lead_answer": {_ANSWER},
    "lead_context": {"eq", "kind", "site", "attr"},
    "thread_problem": {"site", "attr"},
    "thread_machine": {"eq", _ANSWER},
    "chatter": {"oeq"},
    "spare_ticket": {"mt"},
    "spare_decision": {"dr"},
    "target_id": {"eq"},
    "short_id": {"eq"},
    "target_site": {"site", "kind"},
    "short_site": {"site", "kind"},
    "q_long": {"target", "attr"},
    "q_short": {"target_s", "attr_s"},
}
_FORBIDDEN = {
    "split_problem": {_ANSWER},
    "split_ask": {_ANSWER},
    "lead_answer": {"eq", "site", "attr"},
    "lead_ask": {_ANSWER, "eq", "site", "attr"},
    "lead_context": {_ANSWER},
    "thread_problem": {_ANSWER, "eq"},
    "target_site": {"eq"},
    "short_site": {"eq"},
}
_CONVERSATION_SLOTS = {"eq", "kind", "site", "attr", "p1", "p2", "day", "site2"}
_EXTRA_SLOTS = {
    "chatter": {"oeq", "okind", "osite"},
    "a_chatter": {"oeq", "okind", "osite"},
    "spare_ticket": {"mt"},
    "spare_decision": {"dr"},
}
_TARGET_SLOTS = {"eq", "kind", "site"}
_QUESTION_SLOTS = {"target", "target_s", "attr", "attr_s"}
_VOCAB_FORMS = ("fact", "q", "short")
_SLOT = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?::([^{}]+))?\}")


class TemplateError(ValueError):
    """A template file is missing a field or has one of the wrong shape."""

    def __init__(self, path: Path, field: str, problem: str):
        super().__init__(f"{path.name}: {field}: {problem}")
        self.path = path
        self.field = field


# ---------------------------------------------------------------------------------------------
# Template families.


@functools.cache
def load_family(
    lang: str,
    family: str,
    vocabulary: tuple[tuple[str, tuple[str, ...]], ...],
    kinds: tuple[str, ...],
) -> dict:
    """Template family `family` of language `lang`, checked: `vocabulary` are the (group, keys)
    its vocabulary must cover, e.g. ("symptom", ("vibration", ...)); `kinds` the equipment kinds
    its `question_kinds` (other names for a kind in questions), if it has them, must cover."""
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}: use one of {', '.join(LANGS)}")
    if family not in FAMILIES:
        raise ValueError(f"unknown template family {family!r}: use one of {', '.join(FAMILIES)}")
    return read_family(HERE / f"{lang}-{family}.json", dict(vocabulary), kinds)


def read_family(
    path: Path, vocabulary: dict[str, Iterable[str]], kinds: Iterable[str] = ()
) -> dict:
    """Read and check one family file (any path: the tests give broken ones)."""
    data = _read_json(path)
    shapes = data.get("shapes", DEFAULT_WEIGHTS)
    _check_shapes(path, shapes)
    needed = set(ALWAYS)
    for name, weight in shapes.items():
        if weight > 0:
            needed.update(spec.rstrip("?!") for message in SHAPES[name] for spec in message)
    known = set(KINDED_PARTS) | {p.rstrip("?!") for s in SHAPES.values() for m in s for p in m}
    known |= set(ALWAYS)
    extra = set(data) - known - {"vocab", "shapes", "about", "question_kinds"}
    if extra:
        raise TemplateError(path, sorted(extra)[0], "not a part any shape uses (a typo?)")
    for part in sorted(needed | (set(data) & known), key=_part_order):
        if part not in data:
            raise TemplateError(path, part, "missing")
        if part in KINDED_PARTS:
            value = data[part]
            if not isinstance(value, dict) or set(value) != set(FACT_KINDS):
                raise TemplateError(
                    path, part, f"must be an object with the keys {', '.join(FACT_KINDS)}"
                )
            for kind in FACT_KINDS:
                _check_templates(path, f"{part}.{kind}", part, value[kind], kind)
        else:
            _check_templates(path, part, part, data[part], None)
    _check_vocabulary(path, data.get("vocab"), vocabulary)
    if "question_kinds" in data:
        synonyms = data["question_kinds"]
        if not isinstance(synonyms, dict):
            raise TemplateError(path, "question_kinds", "must be an object of kinds")
        for kind in kinds:
            words = synonyms.get(kind)
            if not isinstance(words, list) or not words:
                raise TemplateError(path, f"question_kinds.{kind}", "must be a non-empty list")
            for i, word in enumerate(words):
                _check_word(path, f"question_kinds.{kind}[{i}]", word)
    if "about" in data and not isinstance(data["about"], str):
        raise TemplateError(path, "about", "must be a string")
    return data


def _part_order(part: str) -> tuple[int, str]:
    order = list(ALWAYS) + list(KINDED_PARTS)
    return (order.index(part) if part in order else -1, part)


def _read_json(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(path, "(file)", f"cannot be read: {exc.strerror}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TemplateError(path, "(file)", f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise TemplateError(path, "(file)", "must hold one JSON object")
    return data


def _check_shapes(path: Path, shapes: object) -> None:
    if not isinstance(shapes, dict) or not shapes:
        raise TemplateError(path, "shapes", "must be an object of shape names and weights")
    for name, weight in shapes.items():
        if name not in SHAPES:
            raise TemplateError(path, f"shapes.{name}", f"no such shape: use {', '.join(SHAPES)}")
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0:
            raise TemplateError(path, f"shapes.{name}", "must be a whole number, 0 or more")
    if not any(shapes.values()):
        raise TemplateError(path, "shapes", "every weight is 0")


def _check_templates(path: Path, field: str, part: str, value: object, kind: str | None) -> None:
    if not isinstance(value, list) or not value:
        raise TemplateError(path, field, "must be a non-empty list of templates")
    answer = "owner" if kind == "owner" else "ans"
    required = {answer if s == _ANSWER else s for s in _REQUIRED.get(part, ())}
    forbidden = {answer if s == _ANSWER else s for s in _FORBIDDEN.get(part, ())}
    if part in _TARGETS:
        allowed = _TARGET_SLOTS
    elif part in _QUESTIONS:
        allowed = _QUESTION_SLOTS
    else:
        allowed = _CONVERSATION_SLOTS | _EXTRA_SLOTS.get(part, set())
        if kind is not None and part != "advice":
            allowed = allowed | {answer}
    for i, template in enumerate(value):
        where = f"{field}[{i}]"
        if part in ("target_id", "target_site") and isinstance(template, dict):
            if "" not in template or not all(isinstance(v, str) for v in template.values()):
                raise TemplateError(path, where, 'grammatical cases: strings, one of them ""')
            variants = list(template.values())
        elif isinstance(template, str) and template.strip():
            variants = [template]
        else:
            raise TemplateError(path, where, "must be a non-empty string")
        for text in variants:
            slots = {m.group(1).lower() for m in _SLOT.finditer(text)}
            if "{" in _SLOT.sub("", text) or "}" in _SLOT.sub("", text):
                raise TemplateError(path, where, f"a brace outside a slot in {text!r}")
            if missing := required - slots:
                raise TemplateError(path, where, f"needs {{{sorted(missing)[0]}}}: {text!r}")
            if bad := slots & forbidden:
                raise TemplateError(path, where, f"must not have {{{sorted(bad)[0]}}}: {text!r}")
            if bad := slots - allowed:
                raise TemplateError(path, where, f"unknown slot {{{sorted(bad)[0]}}}: {text!r}")


def _check_vocabulary(path: Path, vocab: object, groups: dict[str, Iterable[str]]) -> None:
    if not isinstance(vocab, dict):
        raise TemplateError(path, "vocab", "missing, or not an object")
    for group, keys in groups.items():
        entries = vocab.get(group)
        if not isinstance(entries, dict):
            raise TemplateError(path, f"vocab.{group}", "missing, or not an object")
        for key in keys:
            entry = entries.get(key)
            if not isinstance(entry, dict):
                raise TemplateError(path, f"vocab.{group}.{key}", "missing, or not an object")
            for form in _VOCAB_FORMS:
                field = f"vocab.{group}.{key}.{form}"
                words = entry.get(form)
                if not isinstance(words, list) or not words:
                    raise TemplateError(path, field, "must be a non-empty list of strings")
                for i, text in enumerate(words):
                    if not isinstance(text, str) or not text.strip() or "{" in text:
                        raise TemplateError(path, f"{field}[{i}]", "must be plain text")


# ---------------------------------------------------------------------------------------------
# Languages: the words every family shares, and the rules that inflect them.


@functools.cache
def load_language(lang: str, kinds: tuple[str, ...]) -> Language:
    """Language `lang`, checked; `kinds`: the equipment kinds it must name."""
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r}: use one of {', '.join(LANGS)}")
    return read_language(HERE / f"{lang}.json", lang, kinds)


def read_language(path: Path, lang: str, kinds: Iterable[str]) -> Language:
    data = _read_json(path)
    for field in ("joiner", "words", "kinds", "people", "days", "sites", "names"):
        if field not in data:
            raise TemplateError(path, field, "missing")
    if not isinstance(data["joiner"], str):
        raise TemplateError(path, "joiner", "must be a string")
    words = data["words"]
    if (
        not isinstance(words, list)
        or len(words) != 2
        or not all(isinstance(w, int) for w in words)
        or not 1 <= words[0] < words[1]
    ):
        raise TemplateError(
            path, "words", "must be [least, most] words a message, 1 <= least < most"
        )
    for kind in kinds:
        _check_word(path, f"kinds.{kind}", data["kinds"].get(kind))
    for field in ("people", "days"):
        if not isinstance(data[field], list) or not data[field]:
            raise TemplateError(path, field, "must be a non-empty list")
        for i, word in enumerate(data[field]):
            _check_word(path, f"{field}[{i}]", word)
    for field in ("sites", "names"):
        if not isinstance(data[field], dict):
            raise TemplateError(path, field, "must be an object")
        for name, value in data[field].items():
            if not isinstance(value, list) or not value:
                raise TemplateError(path, f"{field}.{name}", "must be a non-empty list")
    cls = _RULES[lang]
    for field, name in cls.LISTS:
        if name not in data[field]:
            raise TemplateError(path, f"{field}.{name}", "missing")
    return cls(
        lang=lang,
        joiner=data["joiner"],
        words=(words[0], words[1]),
        kinds=data["kinds"],
        people=data["people"],
        days=data["days"],
        sites=data["sites"],
        names=data["names"],
    )


def _check_word(path: Path, field: str, word: object) -> None:
    """A word: a string, or its forms (an object of strings, "" the plain one)."""
    if isinstance(word, str) and word:
        return
    if isinstance(word, dict) and word.get("") and all(isinstance(v, str) for v in word.values()):
        return
    raise TemplateError(path, field, 'must be a string or an object of forms with ""')


@dataclass(frozen=True)
class Language:
    """A language's words (from `<lang>.json`) and the rules that name sites, people, rates."""

    LISTS = ()  # (field, name) lists its rules read

    lang: str
    joiner: str
    words: tuple[int, int]  # least and most words in a message
    kinds: dict
    people: list
    days: list
    sites: dict
    names: dict

    def site_name(self, code: int) -> str | dict:
        stems, types = self.sites["stems"], self.sites["types"]
        return self._site(
            stems[code % len(stems)],
            types[(code // len(stems)) % len(types)],
            code // (len(stems) * len(types)),
        )

    def _site(self, stem: str, kind, number: int) -> str | dict:
        raise NotImplementedError

    def owner(self, index: int) -> str | dict:
        """Task owner number `index` (0..799), a full name; distinct indexes, distinct names."""
        raise NotImplementedError

    def rate(self, hundredths: int) -> str:
        whole, frac = divmod(hundredths, 100)
        point = "," if self.lang == "ru" else "."
        return f"{whole}{point}{frac // 10}%" if frac % 10 == 0 else f"{whole}{point}{frac:02d}%"

    def modify(self, text: str, form: str) -> str:
        raise KeyError(f"no form {form!r} for {text!r}")


class _English(Language):
    LISTS = (("sites", "stems"), ("sites", "types"), ("names", "first"), ("names", "last"))

    def _site(self, stem, kind, number):
        return f"{stem} {kind}" + (f" {number + 1}" if number else "")

    def owner(self, index):
        first, last = self.names["first"], self.names["last"]
        return f"{first[index % 40]} {last[(index // 40 + 3 * (index % 40)) % 40]}"


class _Russian(Language):
    """Nouns carry their cases as forms: `{kind:prep}` is "насосе", `{site:from}` is
    "с завода «Восток»", `{p1:a}` the past-tense ending of a colleague's gender ("" or "а")."""

    LISTS = (
        ("sites", "stems"),
        ("sites", "types"),
        ("names", "men"),
        ("names", "women"),
        ("names", "surnames"),
    )

    def _site(self, stem, kind, number):
        name = f"«{stem}-{number + 1}»" if number else f"«{stem}»"
        return {
            "": f"{kind['nom']} {name}",
            "nom": f"{kind['nom']} {name}",
            "gen": f"{kind['gen']} {name}",
            "dat": f"{kind['dat']} {name}",
            "prep": f"{kind['prep']} {name}",
            "from": f"{kind['from']} {kind['gen']} {name}",
        }

    def owner(self, index):
        """A full name in the nominative, and its gender ending; the feminine surname adds "а"."""
        first_index = index % 40
        female = first_index % 2 == 1
        first = self.names["women" if female else "men"][first_index // 2]
        last = self.names["surnames"][(index // 40 + 3 * first_index) % 40]
        last += "а" if female else ""
        return {"": f"{first} {last}", "a": "а" if female else ""}


class _Korean(Language):
    """Particles attach to what precedes them, chosen by its last sound: `{eq:이/가}` gives
    "P-003이" (3 is 삼) but "CH-294가" (4 is 사); `{eq:의}` gives "CH-294의"."""

    LISTS = (("sites", "stems"), ("sites", "types"), ("names", "given"), ("names", "surnames"))

    # Whether a digit, as read in Korean, ends in a consonant (batchim): False, True, or "ㄹ"
    # (which takes 로, not 으로); tens and hundreds (십 백 천) end in one too. Letters by name.
    _DIGIT_FINAL = {
        "0": True,
        "1": "ㄹ",
        "2": False,
        "3": True,
        "4": False,
        "5": False,
        "6": True,
        "7": "ㄹ",
        "8": "ㄹ",
        "9": False,
    }
    _LETTER_FINAL = {"L": "ㄹ", "M": True, "N": True, "R": "ㄹ"}

    def _site(self, stem, kind, number):
        return f"{stem} 제{number + 1}{kind}" if number else f"{stem} {kind}"

    def owner(self, index):
        given, surnames = self.names["given"], self.names["surnames"]
        return surnames[(index // 40 + 3 * (index % 40)) % 20] + given[index % 40]

    def modify(self, text, form):
        """Attach a particle: "이/가" picks by the final sound, anything else is appended."""
        if "/" not in form:
            return text + form
        after_consonant, after_vowel = form.split("/")
        final = self._final(text)
        if after_consonant == "으로":
            return text + ("으로" if final is True else "로")
        return text + (after_consonant if final else after_vowel)

    def _final(self, text: str) -> bool | str:
        for ch in reversed(text):
            if "가" <= ch <= "힣":
                jong = (ord(ch) - 0xAC00) % 28
                return False if jong == 0 else ("ㄹ" if jong == 8 else True)
            if ch in self._DIGIT_FINAL:
                return self._DIGIT_FINAL[ch]
            if ch.isascii() and ch.isalpha():
                return self._LETTER_FINAL.get(ch.upper(), False)
            if ch == "%":  # 퍼센트
                return False
        return False


_RULES: dict[str, type[Language]] = {"en": _English, "ru": _Russian, "ko": _Korean}
