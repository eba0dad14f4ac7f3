"""What an A2A stream reads of the session's live stream, and the reply as it is written.

`Watch` is one stream's view of its session's stream (`gloveapp.live.sse.open_feed`): the
stored events tell it to read its task again, the transient frames of its turn carry the
reply's text as the model writes it (`text_delta`, the same frames the chat page and the
SSE stream show). `ReplyChunks` turns those deltas into chunks of the task's `reply`
artifact as A2A streams them (`TaskArtifactUpdateEvent`):

- a stream's first chunk has `append: false` (the client holds no artifact of this
  stream's yet: a resubscribed client starts one), the next ones `append: true`;
- after a tool call, the model's next text starts the artifact over (`append: false`):
  the reply is the turn's last text, not what the agent said before it looked something up;
- the last chunk (`lastChunk: true`, just before `completed`) makes the client's artifact
  the stored reply whatever it missed: the rest of the text (`append: true`) when what it
  got is the reply's start, else the whole reply (`append: false`). Transient frames are
  lost by design (a dropped stream, a relay that was away, no shared channel layer between
  the worker and this server): such a stream ends with the whole reply, as a stream did
  before deltas were streamed.

A client that folds the events with `a2a-sdk`'s own rule (`append_artifact_to_task`) ends
with the task `GetTask` reads.
"""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.types import Artifact, Part, TaskArtifactUpdateEvent

from gloveapp.live.sse import StreamFeed

REPLY_ARTIFACT = "reply"


def reply_artifact_id(task_id: str) -> str:
    return f"turn-{task_id}-reply"


class Watch:
    """One stream's view of the session's stream (no feed: the poll alone answers)."""

    def __init__(self, feed: StreamFeed | None, *, turn_id: int | None = None) -> None:
        self.feed = feed
        self.turn_id = turn_id

    async def next(self, seconds: float) -> tuple[list[tuple[str, dict]], bool]:
        """The frames of the watched turn that arrived (type and payload, in order), and
        whether a stored event did; as soon as anything arrived, or after `seconds`."""
        feed = self.feed
        if feed is None:
            await asyncio.sleep(seconds)
            return [], False
        try:
            first = await asyncio.wait_for(feed.queue.get(), max(0.0, seconds))
        except TimeoutError:
            return [], False
        return self.arrived([first])

    def arrived(self, items: list[Any] | None = None) -> tuple[list[tuple[str, dict]], bool]:
        """`next` without waiting: what has arrived already (after `items`, taken)."""
        feed = self.feed
        items = items or []
        while feed is not None and not feed.queue.empty():
            items.append(feed.queue.get_nowait())
        frames: list[tuple[str, dict]] = []
        stored = False
        for item in items:
            if not isinstance(item, tuple):
                # The feed ended (its buffer overflowed): the poll carries on alone.
                self.feed = None
                stored = True
                continue
            kind, frame = item
            if kind == "stored":
                stored = True
            elif kind == "transient" and isinstance(frame, dict):
                payload = frame.get("payload")
                if isinstance(payload, dict) and payload.get("turnId") == self.turn_id:
                    frames.append((str(frame.get("type")), payload))
        return frames, stored

    async def stored(self, seconds: float) -> None:
        """Returns when a stored event arrived, or after `seconds`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while (left := deadline - loop.time()) > 0:
            _, stored = await self.next(left)
            if stored:
                return


class ReplyChunks:
    """The reply's chunks for one stream of one task (see the module's rules)."""

    def __init__(self, *, task_id: str, context_id: str) -> None:
        self.task_id = task_id
        self.context_id = context_id
        self.shown: str | None = None  # what the client's artifact holds, from this stream
        self.restart = False

    def _event(self, parts: list[Part], *, append: bool, last: bool) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=Artifact(
                artifact_id=reply_artifact_id(self.task_id), name=REPLY_ARTIFACT, parts=parts
            ),
            append=append,
            last_chunk=last,
        )

    def on_frame(self, kind: str, payload: dict[str, Any]) -> TaskArtifactUpdateEvent | None:
        if kind == "tool_use":
            self.restart = self.shown is not None
            return None
        text = payload.get("text")
        if kind != "text_delta" or not isinstance(text, str) or not text:
            return None
        append = self.shown is not None and not self.restart
        self.shown = (self.shown if append and self.shown else "") + text
        self.restart = False
        return self._event([Part(text=text)], append=append, last=False)

    def last(self, artifact: Artifact) -> TaskArtifactUpdateEvent:
        """The last chunk: the client's artifact becomes `artifact` (the stored reply)."""
        whole = "".join(part.text for part in artifact.parts)
        shown = self.shown
        if shown is not None and not self.restart and whole.startswith(shown):
            event = self._event([Part(text=whole[len(shown) :])], append=True, last=True)
        else:
            event = TaskArtifactUpdateEvent(
                task_id=self.task_id,
                context_id=self.context_id,
                artifact=artifact,
                append=False,
                last_chunk=True,
            )
        self.shown, self.restart = whole, False
        return event
