"""The `websocket` channel (R4): a client connects to the delivering consumer's socket, sends
`bind <subscription id> [<access token>]`, gets `bound <id>`; each notification is then `ping <id>` followed
by the notification bundle (the Backport IG's websocket payload).

A bind is refused unless `may_bind(id, token)` allows it: with access control on (`rounds subscriptions
deliver` under ROUNDS_AUTH), only a valid token of the base the Subscription is stored on binds it, so a
stranger who learns a Subscription's id receives nothing. Every refusal is the same `error` line (an unknown
id and another session's id are indistinguishable). A bound socket's bindings are judged again every
RECHECK_S seconds: once the session ends (or the token expires) the socket gets nothing more and is closed
with 1008, so a kept token does not keep a socket listening.

Served by `rounds subscriptions deliver --ws-port P` next to its consumer (the process that has the
notifications). Best effort, as R4 defines the channel: a notification with no client bound is not kept,
and never holds the rest-hook deliveries of its partition back.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

RECHECK_S = 2.0  # how often a bound socket's bindings are judged again (session ended, token expired)
POLICY_VIOLATION = 1008  # the websocket close code (RFC 6455) for a socket whose authorization ended


class WebSocketHub:
    def __init__(self, may_bind: Callable[[str, str | None], bool] | None = None,
                 recheck_s: float = RECHECK_S) -> None:
        self.may_bind = may_bind or (lambda _id, _token: True)
        self.recheck_s = recheck_s
        self._bound: dict[str, set[WebSocket]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self.app = Starlette(routes=[WebSocketRoute("/ws", self._endpoint)])

    async def _endpoint(self, socket: WebSocket) -> None:
        await socket.accept()
        self._loop = asyncio.get_running_loop()
        bindings: dict[str, str | None] = {}  # subscription id -> the token it was bound with
        watcher = asyncio.create_task(self._watch(socket, bindings))
        try:
            while True:
                verb, _, rest = (await socket.receive_text()).strip().partition(" ")
                id, _, token = rest.strip().partition(" ")
                if verb != "bind" or not id:
                    await socket.send_text(f"error expected 'bind <id> [<token>]', not {verb[:40]!r}")
                    continue
                if not await asyncio.to_thread(self.may_bind, id, token.strip() or None):
                    await socket.send_text("error this socket may not bind that subscription")
                    continue
                bindings[id] = token.strip() or None
                self._bound.setdefault(id, set()).add(socket)
                await socket.send_text(f"bound {id}")
        except (WebSocketDisconnect, RuntimeError):  # RuntimeError: closed by _watch
            pass
        finally:
            watcher.cancel()
            self._unbind(socket, bindings)

    async def _watch(self, socket: WebSocket, bindings: dict[str, str | None]) -> None:
        """Judge the socket's bindings again every `recheck_s`: once one is no longer allowed (its session
        ended, its token expired), no notification reaches the socket any more and it is closed (1008)."""
        while True:
            await asyncio.sleep(self.recheck_s)
            for id, token in list(bindings.items()):
                if not await asyncio.to_thread(self.may_bind, id, token):
                    self._unbind(socket, bindings)
                    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                        await socket.close(POLICY_VIOLATION, "the binding's authorization has ended")
                    return

    def _unbind(self, socket: WebSocket, bindings: dict[str, str | None]) -> None:
        for id in bindings:
            self._bound.get(id, set()).discard(socket)

    def bound(self, id: str) -> bool:
        return bool(self._bound.get(id))

    def notify(self, id: str, body: bytes, timeout_s: float = 5.0) -> int:
        """`ping <id>` and the bundle to every client bound to `id` (from any thread); how many got it."""
        if self._loop is None or not self.bound(id):
            return 0
        future = asyncio.run_coroutine_threadsafe(self._send(id, body.decode()), self._loop)
        return future.result(timeout_s)

    async def _send(self, id: str, text: str) -> int:
        sent = 0
        for socket in list(self._bound.get(id, ())):
            try:
                await socket.send_text(f"ping {id}")
                await socket.send_text(text)
                sent += 1
            except (WebSocketDisconnect, RuntimeError):
                self._bound[id].discard(socket)
        return sent

    def serve(self, host: str, port: int) -> threading.Thread:
        """Serve in a daemon thread (returns once listening)."""
        self._server = uvicorn.Server(uvicorn.Config(self.app, host=host, port=port, log_level="warning"))
        thread = threading.Thread(target=self._server.run, daemon=True, name="subscriptions-websocket")
        thread.start()
        while not self._server.started and thread.is_alive():
            threading.Event().wait(0.02)
        return thread

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
