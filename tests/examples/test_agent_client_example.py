"""examples/agent-client (TypeScript, no dependencies) drives the coffee demo from Node.

The client is compiled with `tsc` (Debian's node-typescript, installed by
.ci/ensure-services) under `--strict`, then a Node script drives a real server and turn
worker with it, with no HTML: a restock watch, a large checkout with the customer's
permission prompt and "Confirm your order" slot answered over the API, and a barista's
approval decided over REST. The order is placed exactly once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.api.liveserver import LiveServer
from tests.conftest import service_missing

# A server, a worker and setup_demo of its own: slow on a busy machine.
pytestmark = [pytest.mark.apart, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "examples" / "agent-client" / "glove-agent-client.ts"
DRIVER = Path(__file__).with_name("drive_agent_client.mjs")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    tsc, node = shutil.which("tsc"), shutil.which("node")
    if tsc is None or node is None:
        service_missing("tsc and node are needed (apt-get install nodejs node-typescript)")
    out = tmp_path_factory.mktemp("agent-client")
    run = subprocess.run(
        [
            tsc,
            "--strict",
            "--target",
            "es2022",
            "--module",
            "es2022",
            "--lib",
            "es2022,dom,dom.iterable",
            "--outDir",
            str(out),
            str(CLIENT),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # An ES module: Node reads `.mjs` as one whatever the folder's package.json says.
    module = out / "glove-agent-client.mjs"
    (out / "glove-agent-client.js").rename(module)
    return module


def test_the_typescript_client_drives_the_coffee_demo_from_node(compiled):
    with LiveServer() as server:
        server.manage("setup_demo")
        server.start_worker()
        customer, barista = server.token_for("node-customer"), server.token_for("barista")
        run = subprocess.run(
            [shutil.which("node"), str(DRIVER), compiled.as_uri(), server.url, customer, barista],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert run.returncode == 0, run.stderr + server.worker_logs()
        out = json.loads(run.stdout)
        orders = server.manage(
            "shell",
            "-c",
            "from gloveapp.demo.models import Order; "
            f"print(Order.objects.filter(session__key={out['sessionId']!r}).count())",
        ).split()[-1]

    assert "Shall I watch" in out["replies"][0]
    assert out["inboxTags"] == ["restock_watch"]
    assert sorted(out["answered"]) == ["approval:decided", "checkout", "permission_request"]
    assert out["secondAnswer"] == 409
    assert "is placed" in out["replies"][3]
    assert out["turnStates"] == ["done"] * 4
    assert out["slotsAfter"] == []
    assert out["sameTurn"] is True
    assert out["roastery"] == {"status": 400, "field": "agentName"}
    assert orders == "1"
