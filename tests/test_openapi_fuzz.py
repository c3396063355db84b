"""schemathesis against the server's own OpenAPI description (`GET /openapi.json`).

Bodies valid and invalid by that description go to a real server (with a fake chat model); every
answer must be documented (status, content type, schema), no 5xx, and whatever the description
calls invalid must be refused.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

from tests.conftest_server import INGEST_KEY, RunningServer, make_settings
from tests.test_chat import ADMIN_KEY, FakeModel


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


@pytest.fixture(scope="module")
def api_schema(api):
    return schemathesis.openapi.from_url(f"{api.url}/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


def repeats_a_turn_id(case) -> bool:
    """A body whose turns share an id: refused (400), but JSON Schema cannot say so."""
    body = case.body if case.path == "/turns" else None
    if not isinstance(body, dict) or not isinstance(body.get("turns"), list):
        return False
    cid = body.get("conversation_id")
    ids = [
        (turn.get("id") or f"{cid}-{seq}") if isinstance(turn, dict) else object()
        for seq, turn in enumerate(body["turns"])
    ]
    return len(set(map(str, ids))) < len(ids)


@schema.parametrize()
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_every_route_answers_as_described(case, api):
    headers = {"x-ingest-key": INGEST_KEY, "x-admin-key": ADMIN_KEY}
    excluded = [positive_data_acceptance] if repeats_a_turn_id(case) else []
    case.call_and_validate(base_url=api.url, headers=headers, excluded_checks=excluded)


def test_the_description_is_served_and_names_every_plain_route(api):
    document = api.http.get("/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert set(document["paths"]) == {"/health", "/turns", "/chat", "/memories/{customer_id}"}
