"""The `websocket` channel (R4): a client connects to the delivering consumer's socket, sends
`bind <subscription id> [<access token>]`, gets `bound <id>`; each notification is then `ping <id>` followed
by the notification bundle (the Backport IG's websocket payload).

A bind is refused unless `may_bind(id, token)` allows it: with access control on (`rounds subscriptions
deliver` under ROUNDS_AUTH), only a valid token of the base the Subscription is stored on binds it, so a
stranger who learns a Subscription's id receives nothing. Every refusal is the same `error` line (an unknown
id and another session's id are indistinguishable).

Served by `rounds subscriptions deliver --ws-port P` next to its consumer (the process that has the
notifications). Best effort, as R4 defines the channel: a notification with no client bound is not kept,
and never holds the rest-hook deliveries of its partition back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect


class WebSocketHub:
    def __init__(self, may_bind: Callable[[str, str | None], bool] | None = None) -> None:
        self.may_bind = may_bind or (lambda _id, _token: True)
        self._bound: dict[str, set[WebSocket]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self.app = Starlette(routes=[WebSocketRoute("/ws", self._endpoint)])

    async def _endpoint(self, socket: WebSocket) -> None:
        await socket.accept()
        self._loop = asyncio.get_running_loop()
        ids: set[str] = set()
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
                ids.add(id)
                self._bound.setdefault(id, set()).add(socket)
                await socket.send_text(f"bound {id}")
        except WebSocketDisconnect:
            pass
        finally:
            for id in ids:
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
