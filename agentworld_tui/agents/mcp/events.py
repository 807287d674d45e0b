"""Resumable SSE streams over streamable HTTP: each POST's stream opens with a priming
event (an id, empty data, and a ``retry`` time), and a client that lost a stream may ask
for what it missed with ``Last-Event-ID``.

The SDK gives every transport one event store and names streams by request id, which
two sessions share (each client counts its requests from 1). So the store keeps each
event with the MCP session it was stored in, and replays only into the same session: the
session is taken from the request being served (``SessionScope``, an ASGI layer in front
of the SDK's app), which the tasks a request starts carry along. An event stored where no
session can be told is not kept. The store is bounded (events per stream, events in
all), and a session's events go when the session ends.
"""

from __future__ import annotations

import contextvars
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage
from starlette.types import ASGIApp, Message, Receive, Scope, Send

RETRY_MS = 2000
"""How long a client waits before it reconnects to a stream it lost."""
EVENTS_PER_STREAM = 64
EVENTS_IN_ALL = 8192
SESSION_HEADER = b"mcp-session-id"


@dataclass
class _Session:
    """The MCP session of the request being served ("" until known: the initialize
    request's is known once its answer names it)."""

    id: str = ""


_CURRENT: contextvars.ContextVar[_Session | None] = contextvars.ContextVar(
    "agentworld_mcp_session", default=None
)


def _session_id() -> str:
    current = _CURRENT.get()
    return current.id if current is not None else ""


class SessionScope:
    """The ASGI layer that tells the event store which session a request belongs to."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        session = _Session(headers.get(SESSION_HEADER, b"").decode("latin-1"))

        async def noted(message: Message) -> None:
            if message["type"] == "http.response.start" and not session.id:
                answered = dict(message.get("headers") or [])
                session.id = answered.get(SESSION_HEADER, b"").decode("latin-1")
            await send(message)

        token = _CURRENT.set(session)
        try:
            await self.app(scope, receive, noted)
        finally:
            _CURRENT.reset(token)


@dataclass
class _Event:
    session: str
    stream: StreamId
    message: JSONRPCMessage | None


class SessionEvents(EventStore):
    """A bounded, in-memory event store that replays only into the session it stored for."""

    def __init__(self, per_stream: int = EVENTS_PER_STREAM, in_all: int = EVENTS_IN_ALL) -> None:
        self.per_stream = per_stream
        self.in_all = in_all
        self._events: OrderedDict[EventId, _Event] = OrderedDict()
        self._streams: dict[tuple[str, StreamId], deque[EventId]] = {}

    @property
    def count(self) -> int:
        """Events kept (the SDK tests the store for truth: it has no length)."""
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        session = _session_id()
        event_id = uuid.uuid4().hex
        if not session:
            return event_id  # never replayed (no session to replay into): not kept
        self._events[event_id] = _Event(session, stream_id, message)
        kept = self._streams.setdefault((session, stream_id), deque())
        kept.append(event_id)
        while len(kept) > self.per_stream:
            self._events.pop(kept.popleft(), None)
        while len(self._events) > self.in_all:
            oldest, event = self._events.popitem(last=False)
            self._drop_from_stream(event, oldest)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        event = self._events.get(last_event_id)
        session = _session_id()
        if event is None or not session or event.session != session:
            return None
        kept = list(self._streams.get((event.session, event.stream), ()))
        after = kept[kept.index(last_event_id) + 1 :] if last_event_id in kept else []
        for event_id in after:
            found = self._events.get(event_id)
            if found is not None and found.message is not None:
                await send_callback(EventMessage(found.message, event_id))
        return event.stream

    def forget(self, session: str) -> None:
        """Drop every event of an ended session."""
        for key in [k for k in self._streams if k[0] == session]:
            for event_id in self._streams.pop(key):
                self._events.pop(event_id, None)

    def _drop_from_stream(self, event: _Event, event_id: EventId) -> None:
        key = (event.session, event.stream)
        kept = self._streams.get(key)
        if kept is None:
            return
        try:
            kept.remove(event_id)
        except ValueError:
            return
        if not kept:
            del self._streams[key]
