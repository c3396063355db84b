"""Secret redaction: API keys, tokens, private keys and passwords leave a turn before it is stored.

The patterns are Yelp's detect-secrets (its regex detectors and its keyword detector's
`password: …` forms), plus a few it lacks (whole private key blocks, `sk-…` keys of OpenAI and
Anthropic, Authorization headers, Google API keys, Slack webhooks). Its entropy detectors are
not used: they flag commit hashes, UUIDs and ordinary ids, which people search their
conversations for. A secret becomes a marker that says what was there, `[redacted:aws-key]`, so
recall still shows that something was said.

On by default; `IRENEO_REDACT=0` (`Settings.redact`) or `Memory(redact=False)` turns it off.
docs/privacy.md lists what is caught and what is not.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import replace

from ireneo.model import Block, Turn

# detect-secrets' secret types, by the marker name ireneo shows.
_DETECTOR_NAMES = {
    "ArtifactoryDetector": "artifactory-token",
    "AWSKeyDetector": "aws-key",
    "AzureStorageKeyDetector": "azure-key",
    "BasicAuthDetector": "password",
    "CloudantDetector": "cloudant-key",
    "DiscordBotTokenDetector": "discord-token",
    "GitHubTokenDetector": "github-token",
    "GitLabTokenDetector": "gitlab-token",
    "IbmCloudIamDetector": "ibm-key",
    "IbmCosHmacDetector": "ibm-key",
    "JwtTokenDetector": "jwt",
    "MailchimpDetector": "mailchimp-key",
    "NpmDetector": "npm-token",
    "OpenAIDetector": "openai-key",
    "PypiTokenDetector": "pypi-token",
    "SendGridDetector": "sendgrid-key",
    "SlackDetector": "slack-token",
    "SoftlayerDetector": "softlayer-key",
    "SquareOAuthDetector": "square-key",
    "StripeDetector": "stripe-key",
    "TelegramBotTokenDetector": "telegram-token",
    "TwilioKeyDetector": "twilio-key",
}

# What detect-secrets lacks or catches only in part (its PrivateKeyDetector finds the header line).
_OWN_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "private-key",
        r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END[A-Z ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
    ("private-key", r"PuTTY-User-Key-File-\d: [\s\S]*?Private-MAC: [0-9a-f]+"),
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    ("openai-key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}"),
    ("auth-header", r"(?i)(?<=\bauthorization: )(?:basic|bearer|token) [A-Za-z0-9._~+/=-]{8,}"),
    ("auth-header", r"(?i)(?<=\bbearer )[A-Za-z0-9._~+/-]{20,}=*"),
    ("google-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("slack-webhook", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]{20,}"),
    ("stripe-key", r"\b(?:sk|rk|pk)_(?:live|test)_[0-9a-zA-Z]{16,}"),
)

MIN_KEYWORD_SECRET = 6  # `password: hunter2` is a secret; `secret: yes` is not one worth a marker


def redact(text: str) -> str:
    """`text` with every secret found replaced by `[redacted:KIND]`."""
    # At one place, the longest match wins, and between equals the more specific kind.
    spans = sorted(_spans(text), key=lambda span: (span[0], -span[1], span[3]))
    if not spans:
        return text
    out, end = [], 0
    for start, stop, kind, _ in spans:
        if start < end:  # inside a secret already replaced (detectors overlap)
            continue
        out.append(text[end:start])
        out.append(f"[redacted:{kind}]")
        end = stop
    out.append(text[end:])
    return "".join(out)


def load_detectors() -> None:
    """Compile the detectors now: importing detect-secrets and compiling its patterns takes
    ~0.2 s, which the first turn redacted would otherwise wait for (a server does it at start)."""
    _patterns()


def redact_turn(turn: Turn) -> Turn:
    """The turn with every block's text redacted (the same object when nothing was found)."""
    blocks = tuple(replace(block, text=redact(block.text)) for block in turn.blocks)
    if all(new.text == old.text for new, old in zip(blocks, turn.blocks, strict=True)):
        return turn
    return replace(turn, blocks=blocks)


def redact_block(block: Block) -> Block:
    return replace(block, text=redact(block.text))


# A match ends where its token does: some patterns stop early (detect-secrets' JWT is lazy).
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_+/=-]*(?:\.[A-Za-z0-9_+/=-]+)*")


# The keyword detector's patterns are the slowest, and all need one of these words.
_KEYWORD_HINT = re.compile(r"(?i)key|pass|pwd|secret|contrase")


def _spans(text: str) -> Iterator[tuple[int, int, str, int]]:
    """(start, stop, marker, rank) of every secret found; rank 0 is the most specific."""
    keywords = _KEYWORD_HINT.search(text) is not None
    for kind, pattern, group, rank in _patterns():
        if rank == 2 and not keywords:
            continue
        for match in pattern.finditer(text):
            start, stop = match.span(group)
            if group and stop - start < MIN_KEYWORD_SECRET:
                continue
            if kind != "private-key":
                stop = _TOKEN_TAIL.match(text, stop).end()
            if start < stop:
                yield start, stop, kind, rank


@functools.cache
def _patterns() -> tuple[tuple[str, re.Pattern, int, int], ...]:
    """(marker, regex, group holding the secret, rank) from our own list (rank 0), detect-secrets'
    detectors (1) and its keyword detector (2)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP

    out = [(name, re.compile(pattern), 0, 0) for name, pattern in _OWN_PATTERNS]
    for detector in get_mapping_from_secret_type_to_class().values():
        name = _DETECTOR_NAMES.get(detector.__name__)
        if name is None:  # entropy and IP detectors: ordinary ids look the same
            continue
        for pattern in detector.denylist:
            out.append((name, pattern, _secret_group(detector.__name__, pattern), 1))
    for pattern, group in CONFIG_DENYLIST_REGEX_TO_GROUP.items():
        out.append(("password", pattern, group, 2))
    return tuple(out)


def _secret_group(detector: str, pattern: re.Pattern) -> int:
    """The group that holds the secret itself when the pattern matches context around it (an
    AWS secret key after `aws_secret…=`, a password between `://user:` and `@`); else 0."""
    if detector in ("AWSKeyDetector", "BasicAuthDetector") and pattern.groups:
        return pattern.groups
    return 0
