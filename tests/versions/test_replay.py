"""Replaying recorded conversations against an agent version, through `replay_agent`."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from gloveapp.conversations.models import Message
from gloveapp.versions.models import ReplayResult, ReplayRun
from gloveapp.versions.services import version_draft
from tests.fakes import replay_model
from tests.versions.conftest import mentions, recorded

pytestmark = pytest.mark.django_db


def replay(*args: str) -> ReplayRun:
    call_command("replay_agent", "shop", *args, stdout=open("/dev/null", "w"))
    return ReplayRun.objects.latest("id")


def test_it_replays_conversations_on_the_same_version_identically(scripted_shop, customer):
    ids = recorded(customer, 25)
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT)

    run = replay("--ids", ",".join(ids))

    assert (run.status, run.done, run.diverged) == ("done", 25, 0)
    results = list(ReplayResult.objects.filter(run=run))
    assert all(result.turns and all(turn["same"] for turn in result.turns) for result in results)
    assert sum(result.unrecorded_calls for result in results) == 0
    stock = next(r for r in results if r.session_id == ids[0]).turns[1]
    assert stock["replayed"]["tool_calls"] == [
        {"tool": "check_stock", "args": {"product": "colombia"}}
    ]


def test_it_shows_exactly_the_conversations_a_changed_prompt_affects(scripted_shop, customer):
    ids = recorded(customer, 20)
    version_draft(
        agent_name="shop",
        system_prompt=replay_model.PROMPT + '\nwhen "refund" reply "Refunds take 5 days."',
    )

    run = replay("--ids", ",".join(ids))

    diverged = set(
        ReplayResult.objects.filter(run=run, diverged=True).values_list("session_id", flat=True)
    )
    assert diverged == mentions(ids, "refund") and diverged
    assert run.diverged == len(diverged)
    result = ReplayResult.objects.get(run=run, session_id=sorted(diverged)[0])
    assert result.divergence == "turn 1: replies"
    assert result.turns[0]["replayed"]["replies"] == ["Refunds take 5 days."]


def test_it_marks_a_tool_call_the_recording_never_saw(scripted_shop, customer):
    ids = recorded(customer, 5)
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT + '\nask about "peru"')

    run = replay("--ids", ids[3])

    result = ReplayResult.objects.get(run=run)
    assert result.diverged and result.divergence == "turn 1: tool calls"
    assert result.unrecorded_calls == 1
    assert result.turns[0]["replayed"]["unrecorded"] == [
        {"tool": "check_stock", "args": {"product": "peru"}}
    ]


def test_it_never_changes_the_recording(scripted_shop, customer):
    ids = recorded(customer, 10)
    before = list(Message.objects.order_by("pk").values())
    version_draft(agent_name="shop", system_prompt='when "stock" reply "No."')

    replay("--sample", "10", "--seed", "1")

    assert list(Message.objects.order_by("pk").values()) == before
    assert ReplayRun.objects.get().total == len(ids)


def test_it_resumes_a_run_without_replaying_a_conversation_twice(scripted_shop, customer):
    ids = recorded(customer, 12)
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT)
    from gloveapp.versions.runs import replay_run_advance, replay_run_create

    run = replay_run_create(
        version=version_draft(agent_name="shop"), session_ids=ids, selection="ids"
    )
    replay_run_advance(run.pk, limit=5)  # its worker died after one batch

    resumed = replay("--resume", str(run.pk))

    assert (resumed.pk, resumed.done, resumed.status) == (run.pk, 12, "done")
    assert ReplayResult.objects.filter(run=run).count() == 12


def test_it_chooses_conversations_by_the_admins_filter(scripted_shop, customer, staff):
    ids = recorded(customer, 6)
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT)

    run = replay("--filter", f"q={ids[2]}", "--as", "sam")

    assert run.session_ids == [ids[2]]


def test_it_runs_the_checks_the_team_wrote_once(scripted_shop, customer):
    from gloveapp.versions.models import AgentPointer

    ids = recorded(customer, 5)
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT)
    AgentPointer.objects.filter(agent_name="shop").update(
        checks='must_call check_stock when "stock"\nmust_not_call refund\nnever_says "kenya"'
    )

    run = replay("--ids", ",".join(ids))

    failed = {
        result.session_id: [f["check"] for f in result.findings if not f["passed"]]
        for result in ReplayResult.objects.filter(run=run)
    }
    assert failed[ids[1]] == ['never_says "kenya"']
    assert failed[ids[0]] == [] and run.failed_checks == 1


def test_it_refuses_an_unknown_version(scripted_shop, customer):
    recorded(customer, 1)
    with pytest.raises(CommandError, match="no draft version"):
        replay("--sample", "1")


def test_a_version_that_asks_approval_for_a_tool_shows_it_in_the_report(scripted_shop, customer):
    ids = recorded(customer, 5)
    version_draft(
        agent_name="shop",
        system_prompt=replay_model.PROMPT,
        approval_policies={"check_stock": {"assignee_group": "managers"}},
    )

    run = replay("--ids", ",".join(ids))

    diverged = dict(
        ReplayResult.objects.filter(run=run, diverged=True).values_list("session_id", "divergence")
    )
    assert diverged == {
        ids[0]: "turn 2: approvals",
        ids[1]: "turn 1: approvals",
        ids[3]: "turn 1: approvals",
    }


def test_a_version_offering_fewer_tools_diverges_where_they_were_called(scripted_shop, customer):
    ids = recorded(customer, 5)
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT, tools=["refund"])

    run = replay("--ids", ",".join(ids))

    assert set(
        ReplayResult.objects.filter(run=run, diverged=True).values_list("session_id", flat=True)
    ) == mentions(ids, "stock")


def test_a_judge_model_weighs_each_changed_reply_and_its_cost_is_counted(
    scripted_shop, customer, staff, settings, spans
):
    from django.test import Client

    from gloveapp.versions.models import AgentPointer

    settings.GLOVE_MODEL_PRICES = {
        **settings.GLOVE_MODEL_PRICES,
        "scripted:judge": {"input": 1, "output": 5, "cache_read": 0, "cache_write": 0},
    }
    ids = recorded(customer, 5)
    version_draft(
        agent_name="shop",
        system_prompt=replay_model.PROMPT
        + '\nwhen "refund" reply "Refunds take 5 days."\nwhen "stock" reply "Ask again later."',
    )
    AgentPointer.objects.filter(agent_name="shop").update(
        checks='judge judge-test:strict "Answers what was asked"'
    )

    run = replay("--ids", ",".join(ids))

    results = {result.session_id: result for result in ReplayResult.objects.filter(run=run)}
    stock, refund, unchanged = results[ids[0]], results[ids[2]], results[ids[4]]
    assert stock.findings == [
        {
            "check": 'judge judge-test:strict "Answers what was asked"',
            "passed": False,
            "why": "turn 2: It no longer answers the question.",
            "judged": [
                {"turn": 2, "verdict": "fail", "reason": "It no longer answers the question."}
            ],
        }
    ]
    assert "judged" not in stock.turns[0]  # the same reply: no judge asked
    assert refund.findings[0]["passed"] and refund.turns[0]["judged"] == [
        {
            "check": 'judge judge-test:strict "Answers what was asked"',
            "verdict": "pass",
            "reason": "It explains the refund.",
        }
    ]
    assert unchanged.findings[0] == {
        "check": 'judge judge-test:strict "Answers what was asked"',
        "passed": True,
        "why": "",
        "judged": [],
    }
    # One call per changed reply: 100 tokens in at $1/M, 20 out at $5/M.
    assert (stock.judge_tokens, str(stock.judge_cost)) == (120, "0.00020000")
    assert (unchanged.judge_tokens, unchanged.judge_cost) == (0, 0)
    run.refresh_from_db()
    judged_turns = sum(len(r.findings[0]["judged"]) for r in results.values())
    assert judged_turns == 4  # three stock questions, one refund
    assert run.judge_tokens == 120 * judged_turns and run.failed_checks == 3
    calls = [span for span in spans.get_finished_spans() if span.name == "chat scripted:judge"]
    assert len(calls) == judged_turns
    assert calls[0].attributes["gen_ai.provider.name"] == "judge-test"
    assert calls[0].attributes["gen_ai.usage.output_tokens"] == 20
    assert calls[0].parent is not None  # under its replay.conversation

    client = Client()
    client.force_login(staff)
    page = client.get(f"/admin/versions/replayrun/{run.pk}/change/?show=all").content.decode()
    assert 'data-verdict="fail"' in page and "It no longer answers the question." in page
    assert "judge: <span data-judge-usage>480 tokens, $0.0008</span>" in page


def test_it_refuses_a_judge_without_a_model():
    from gloveapp.versions.report import ChecksInvalid, parse_checks

    with pytest.raises(ChecksInvalid, match="judge provider:model"):
        parse_checks("judge strict")
    assert parse_checks('judge anthropic:claude-haiku-4-5 "Quotes prices"')[0]["criterion"] == (
        "Quotes prices"
    )


def test_the_sandbox_runs_a_call_never_recorded_and_undoes_its_writes(scripted_shop, customer):
    from django.contrib.auth.models import Group

    ids = recorded(customer, 5)
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT + "\nreserve on stock")

    run = replay("--ids", ",".join(ids[:2]), "--unseen-tools", "run-sandbox")

    assert run.unseen_tools == "run-sandbox"
    first = ReplayResult.objects.get(run=run, session_id=ids[0])
    asked = first.turns[1]["replayed"]
    # The tool ran (its answer counts the row it wrote) and the model read its result...
    assert asked["replies"] == ["colombia reserved (1 now)."]
    assert asked["unrecorded"] == [
        {"tool": "reserve", "args": {"product": "colombia"}, "sandbox": True}
    ]
    assert first.diverged and first.divergence == "turn 2: tool calls"
    # ...each conversation in a sandbox of its own, rolled back: nothing stayed.
    second = ReplayResult.objects.get(run=run, session_id=ids[1])
    assert second.turns[0]["replayed"]["replies"] == ["kenya reserved (1 now)."]
    assert not Group.objects.filter(name__startswith="reserved:").exists()


def test_without_the_sandbox_a_call_never_recorded_does_not_run(scripted_shop, customer):
    from django.contrib.auth.models import Group

    ids = recorded(customer, 1)
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT + "\nreserve on stock")

    run = replay("--ids", ids[0])

    turn = ReplayResult.objects.get(run=run).turns[1]["replayed"]
    assert turn["unrecorded"] == [{"tool": "reserve", "args": {"product": "colombia"}}]
    assert not Group.objects.filter(name__startswith="reserved:").exists()


def test_the_judge_is_any_provider_speaking_its_wire_format(
    scripted_shop, customer, settings, monkeypatch
):
    """The judge on the OpenAI adapter, against a local server speaking its wire format."""
    from gloveapp.versions.models import AgentPointer
    from tests.fakes.openai_server import FakeOpenAI

    settings.GLOVE_MODEL_PRICES = {
        **settings.GLOVE_MODEL_PRICES,
        "gpt-test": {"input": 2, "output": 10, "cache_read": 0, "cache_write": 0},
    }
    ids = recorded(customer, 3)
    version_draft(
        agent_name="shop",
        system_prompt=replay_model.PROMPT + '\nwhen "refund" reply "No refunds."',
    )
    AgentPointer.objects.filter(agent_name="shop").update(checks="judge openai:gpt-test")
    with FakeOpenAI() as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        server.reply_stream(
            ['{"verdict": "fail", ', '"reason": "It refuses what it used to explain."}'],
            prompt_tokens=300,
            completion_tokens=40,
        )

        run = replay("--ids", ids[2])

        (asked,) = server.bodies
    result = ReplayResult.objects.get(run=run)
    assert result.findings[0]["why"] == "turn 1: It refuses what it used to explain."
    assert result.turns[0]["judged"][0]["verdict"] == "fail"
    # 300 tokens in at $2/M, 40 out at $10/M.
    assert (result.judge_tokens, str(result.judge_cost)) == (340, "0.00100000")
    question = asked["messages"][-1]["content"]
    question = question if isinstance(question, str) else question[0]["text"]
    assert "Customer: I want a refund" in question and "Replayed reply:\nNo refunds." in question


def test_a_sandboxed_tool_that_fails_leaves_the_conversations_sandbox_usable(
    scripted_shop, customer
):
    from django.contrib.auth.models import Group

    from gloveapp.conversations.services import session_create

    session = session_create(owner=customer, agent_name="shop", session_id="twice")
    replay_model.record(session.pk, ["stock of peru?", "stock of peru?", "stock of kenya?"])
    version_draft(agent_name="shop", system_prompt=replay_model.PROMPT + "\nreserve on stock")

    run = replay("--ids", session.pk, "--unseen-tools", "run-sandbox")

    replies = [turn["replayed"]["replies"] for turn in ReplayResult.objects.get(run=run).turns]
    # The second reservation of peru breaks the name's unique constraint: its savepoint
    # is rolled back, the model reads the error, and the third call still runs, seeing
    # the first (the conversation's sandbox), which is gone afterwards.
    assert replies == [["peru reserved (1 now)."], ["Done."], ["kenya reserved (2 now)."]]
    assert not Group.objects.filter(name__startswith="reserved:").exists()
