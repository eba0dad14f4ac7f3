"""Approvals in the runtime: the decision vocabulary, fingerprints, and what runs."""

from __future__ import annotations

import asyncio

import pytest

from gloveapp.core import Tool, tool
from gloveapp.core.approvals.decisions import (
    Decision,
    DecisionRefused,
    StaleFingerprint,
    canonical_json,
    check_decision,
    fingerprint,
)
from gloveapp.core.approvals.edits import validate_edit
from gloveapp.core.approvals.policy import APPROVAL_RENDERER, ApprovalPolicy
from tests.core.support import calls, make_glove

ORDER = {"product": "Yirgacheffe", "quantity": 12}


def ordering(ran: list, **policy):
    @tool(description="Place an order.", approval=ApprovalPolicy(**policy))
    async def place_order(product: str, quantity: int) -> dict:
        ran.append({"product": product, "quantity": quantity})
        return {"ordered": quantity}

    return place_order


async def until(condition) -> None:
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def decide(answer_for, *, ran, args=ORDER, **policy):
    """Run one call of place_order and answer its approval prompt with answer_for(prompt)."""
    glove, _, store = make_glove(
        [calls(("place_order", args)), "done"], tools=[ordering(ran, **policy)]
    )
    answering = asyncio.create_task(glove.process_request("order"))
    await until(lambda: glove.display_manager.stack)
    [slot] = glove.display_manager.stack
    glove.display_manager.resolve(slot.id, answer_for(slot.input))
    await answering
    [message] = [m for m in await store.get_messages() if m.tool_results]
    return slot, message.tool_results[0].result


def test_it_fingerprints_the_canonical_arguments():
    assert fingerprint("t", {"b": 1, "a": [1, "é"]}) == fingerprint("t", {"a": [1, "é"], "b": 1})
    assert fingerprint("t", {"a": 1}) != fingerprint("t", {"a": 2})
    assert fingerprint("t", {"a": 1}) != fingerprint("u", {"a": 1})
    assert len(fingerprint("t", {})) == 64
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    with pytest.raises(ValueError):
        canonical_json({"a": float("nan")})


def test_it_checks_the_decision_against_what_the_request_allows():
    current = fingerprint("t", ORDER)
    check_decision(Decision("approve", current), allowed=("approve",), current=current)
    with pytest.raises(StaleFingerprint):
        check_decision(Decision("approve", "0" * 64), allowed=("approve",), current=current)
    with pytest.raises(DecisionRefused, match="not allowed"):
        check_decision(Decision("edit", current, args={}), allowed=("approve",), current=current)
    with pytest.raises(DecisionRefused, match="args"):
        check_decision(Decision("edit", current), allowed=("edit",), current=current)
    with pytest.raises(DecisionRefused, match="text"):
        check_decision(
            Decision("respond", current, text=" "), allowed=("respond",), current=current
        )


def test_a_policy_refuses_unknown_decisions_and_bad_deadlines():
    with pytest.raises(ValueError):
        ApprovalPolicy(decisions=("maybe",))
    with pytest.raises(ValueError):
        ApprovalPolicy(on_expire="edit")
    with pytest.raises(ValueError):
        ApprovalPolicy(expire_after=-1)
    policy = ApprovalPolicy(decisions=("approve", "reject"), expire_after=60, on_expire="approve")
    assert ApprovalPolicy.from_dict(policy.to_dict()) == policy


def test_an_edit_is_validated_against_the_tools_input_schema():
    place_order = ordering([])
    assert validate_edit(place_order, {"product": "AA", "quantity": 2})["quantity"] == 2
    with pytest.raises(DecisionRefused, match="quantity"):
        validate_edit(place_order, {"product": "AA", "quantity": "lots"})

    async def run(args, ctx):
        return args

    raw = Tool(
        name="raw",
        description="",
        run=run,
        json_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    validate_edit(raw, {"n": 1})
    with pytest.raises(DecisionRefused, match="raw"):
        validate_edit(raw, {"n": "x"})


async def test_it_asks_with_the_fingerprint_and_runs_exactly_the_approved_arguments():
    ran: list = []
    slot, result = await decide(
        lambda prompt: {"decision": "approve", "fingerprint": prompt["fingerprint"]}, ran=ran
    )
    assert slot.renderer == APPROVAL_RENDERER
    assert slot.input["toolInput"] == ORDER
    assert slot.input["fingerprint"] == fingerprint("place_order", ORDER)
    assert slot.input["policy"]["decisions"] == ["approve", "edit", "reject"]
    assert ran == [ORDER]
    assert result.data == {"ordered": 12}


async def test_edit_then_approve_runs_the_tool_with_the_edited_arguments():
    ran: list = []
    edited = {"product": "Yirgacheffe", "quantity": 3}
    _, result = await decide(
        lambda prompt: {"decision": "edit", "fingerprint": prompt["fingerprint"], "args": edited},
        ran=ran,
    )
    assert ran == [edited]
    assert result.data == {"ordered": 3}


async def test_a_stale_fingerprint_never_runs_the_tool():
    ran: list = []
    stale = fingerprint("place_order", {"product": "Yirgacheffe", "quantity": 1})
    _, result = await decide(lambda prompt: {"decision": "approve", "fingerprint": stale}, ran=ran)
    assert ran == []
    assert result.status == "error"
    assert "did not run" in result.message


async def test_a_rejection_gives_the_agent_the_reason():
    ran: list = []
    _, result = await decide(
        lambda p: {"decision": "reject", "fingerprint": p["fingerprint"], "reason": "Too many"},
        ran=ran,
    )
    assert ran == []
    assert result.status == "error"
    assert result.message.endswith("Reason: Too many")
    assert result.data == {"decision": "reject", "reason": "Too many"}


async def test_a_response_stands_instead_of_the_tools_result():
    ran: list = []
    _, result = await decide(
        lambda p: {"decision": "respond", "fingerprint": p["fingerprint"], "text": "Call us"},
        ran=ran,
        decisions=("approve", "respond"),
    )
    assert ran == []
    # The agent reads the person's text as the call's result, not as an error.
    assert result.status == "success" and result.data == "Call us"
    assert "Call us" in result.message


async def test_an_expired_request_reads_expired_not_rejected_by_a_person():
    ran: list = []
    _, result = await decide(
        lambda p: {
            "decision": "reject",
            "fingerprint": p["fingerprint"],
            "reason": "No decision by the deadline: the request expired.",
            "expired": True,
        },
        ran=ran,
    )
    assert ran == []
    assert result.status == "error"
    assert "expired before anyone decided" in result.message
    assert "rejected by a person" not in result.message


async def test_a_decision_the_tool_does_not_allow_or_garbage_runs_nothing():
    ran: list = []
    _, refused = await decide(
        lambda p: {"decision": "edit", "fingerprint": p["fingerprint"], "args": ORDER},
        ran=ran,
        decisions=("approve", "reject"),
    )
    _, garbage = await decide(lambda p: True, ran=ran)
    _, bad_edit = await decide(
        lambda p: {"decision": "edit", "fingerprint": p["fingerprint"], "args": {"quantity": "x"}},
        ran=ran,
    )
    assert ran == []
    assert [r.status for r in (refused, garbage, bad_edit)] == ["error"] * 3


async def test_a_withdrawn_request_runs_nothing():
    ran: list = []
    glove, _, _ = make_glove([calls(("place_order", ORDER)), "done"], tools=[ordering(ran)])
    answering = asyncio.create_task(glove.process_request("order"))
    await until(lambda: glove.display_manager.stack)
    [slot] = glove.display_manager.stack
    glove.display_manager.reject(slot.id, RuntimeError("gone"))
    await answering
    assert ran == []


async def test_a_policy_with_when_asks_only_for_the_calls_it_names():
    ran: list = []
    glove, _, _ = make_glove(
        [calls(("place_order", {"product": "AA", "quantity": 2})), "done"],
        tools=[ordering(ran, when=lambda args: args.get("quantity", 0) > 5)],
    )
    await glove.process_request("order")
    assert ran == [{"product": "AA", "quantity": 2}]
    assert not glove.display_manager.stack
