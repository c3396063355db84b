"""schemathesis against the server's own OpenAPI description (`GET /openapi.json`).

Bodies valid and invalid by that description go to a real server (with a fake chat model); every
answer must be documented (status, content type, schema), no 5xx, and whatever the description
calls invalid must be refused.

The description is a file of the package (the server serves it as it is, checked below), so
the tests are made from it when this module is collected. schemathesis' fixture-loaded schemas
(`schemathesis.pytest.from_fixture`) rename pytest's items through a private attribute that
pytest 9.2 no longer has; a schema known at collection becomes plain parametrized items.
"""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from ireneo.errors import FormatError
from ireneo.formats.gateway import parse_gateway_body
from ireneo.formats.json_body import decode_json_body
from tests.conftest_chat import ADMIN_KEY, FakeModel
from tests.conftest_server import INGEST_KEY, RunningServer, make_settings


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    model = FakeModel()
    srv = RunningServer(
        make_settings(
            tmp_path_factory.mktemp("openapi"),
            admin_key=ADMIN_KEY,
            llm_base_url=model.base_url,
            llm_model="fake-model",
            max_body_bytes=64 * 1024,
        )
    )
    yield srv
    srv.close()
    model.close()


DESCRIPTION = json.loads(
    resources.files("ireneo.resources").joinpath("openapi.json").read_text(encoding="utf-8")
)
schema = schemathesis.openapi.from_dict(DESCRIPTION)


def _patterns() -> dict[str, dict[str, re.Pattern]]:
    """Each path's `pattern`s by field name: its path parameters' and its JSON body's."""
    found: dict[str, dict[str, re.Pattern]] = {}
    for path, operations in DESCRIPTION["paths"].items():
        for operation in operations.values():
            fields = {p["name"]: p["schema"] for p in operation.get("parameters", [])}
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                name = body["schema"]["$ref"].rsplit("/", 1)[-1]
                fields |= DESCRIPTION["components"]["schemas"][name].get("properties", {})
            found.setdefault(path, {}).update(
                {field: re.compile(s["pattern"]) for field, s in fields.items() if "pattern" in s}
            )
    return found


PATTERNS = _patterns()


def breaks_a_pattern(case) -> bool:
    """A string the generator made past the `pattern` the description gives its field
    (schemathesis' boundary cases do not always honour `pattern`): the server rightly refuses
    it, e.g. a customer_id holding U+0087, a control character."""
    values = dict(case.path_parameters or {})
    if isinstance(case.body, dict):
        values |= case.body
    return any(
        isinstance(values.get(field), str) and not pattern.search(values[field])
        for field, pattern in PATTERNS.get(case.path, {}).items()
    )


def refused_by_a_rule_beyond_the_schema(case) -> bool:
    """A body the gateway parser refuses though it may pass the schema: turns repeating an id
    (JSON Schema cannot say "unique by id"), or a string the generator produced past a pattern
    (schemathesis' boundary cases do not always honour `pattern`)."""
    if case.path != "/turns" or not isinstance(case.body, dict):
        return False
    try:
        parse_gateway_body(decode_json_body(json.dumps(case.body).encode()))
    except FormatError:
        return True
    return False


@schema.parametrize()
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_every_route_answers_as_described(case, api):
    headers = {"x-ingest-key": INGEST_KEY, "x-admin-key": ADMIN_KEY}
    if refused_by_a_rule_beyond_the_schema(case) or breaks_a_pattern(case):
        response = case.call_and_validate(
            base_url=api.url, headers=headers, excluded_checks=[positive_data_acceptance]
        )
        assert 400 <= response.status_code < 500  # 400, or 401 when the key was mutated too
    else:
        case.call_and_validate(base_url=api.url, headers=headers)


def test_the_description_is_served_and_names_every_plain_route(api):
    document = api.http.get("/openapi.json").json()
    assert document == DESCRIPTION  # what the fuzz test was made from
    assert document["openapi"].startswith("3.")
    assert set(document["paths"]) == {"/health", "/turns", "/chat", "/memories/{customer_id}"}
