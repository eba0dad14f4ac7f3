"""Every route of the OpenAPI schema, fuzzed from the schema itself: no input is a 5xx."""

from __future__ import annotations

import json
import warnings
from urllib.parse import quote, urlencode

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.core import NOT_SET

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

EXAMPLES_PER_OPERATION = 15


def test_it_serves_an_openapi_3_schema_and_its_docs(owner_client):
    schema = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    assert schema["openapi"].startswith("3.")
    assert "/api/sessions/{session_id}/inbox/update" in schema["paths"]
    assert owner_client.get("/api/docs/").status_code == 200


def test_it_never_answers_a_fuzzed_request_with_a_5xx(owner_client, session_id):
    raw = owner_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    schema = schemathesis.openapi.from_dict(raw)
    # DELETE last: once it removes the owner's session, every later case would be a 404.
    operations = sorted(
        (result.ok() for result in schema.get_all_operations()),
        key=lambda operation: operation.method.upper() == "DELETE",
    )
    assert len(operations) >= 20
    failures: list[str] = []
    seen: list[int] = []

    for operation in operations:
        # Half the cases use the owner's real session, so the fuzz reaches the services
        # behind the 404 instead of stopping at "no such session".
        @given(case=operation.as_strategy(), own_session=st.booleans())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        def probe(case, own_session: bool) -> None:
            params = dict(case.path_parameters or {})
            if own_session and "session_id" in params:
                params["session_id"] = session_id
            path = case.path
            for name, value in params.items():
                path = path.replace("{" + name + "}", quote(str(value), safe=""))
            if case.query:
                path += "?" + urlencode(case.query, doseq=True)
            kwargs = {}
            if case.body is not NOT_SET:
                kwargs = {
                    "data": json.dumps(case.body, default=str),
                    "content_type": "application/json",
                }
            with warnings.catch_warnings():
                # The chat stream is async; the test client drains it synchronously.
                warnings.simplefilter("ignore")
                response = owner_client.generic(case.method, path, **kwargs)
                if response.streaming:
                    b"".join(response)
            seen.append(response.status_code)
            if response.status_code >= 500:
                failures.append(f"{case.method} {path} {kwargs.get('data', '')[:300]}")

        probe()

    assert failures == []
    # The fuzz got past validation into the services, not only 400s and 404s.
    assert sum(200 <= status < 300 for status in seen) > len(operations)
