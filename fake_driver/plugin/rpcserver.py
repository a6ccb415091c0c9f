"""The plugin's gRPC server: quick unary calls answered on the server's own thread.

grpcio's server (``grpc.server``) hands each call from its completion-queue thread to a pool
thread, which then asks the queue thread for the request message and waits for it: per call
two hand-offs between Python threads, each a wake-up and a turn of the interpreter lock, on top
of the HTTP/2 work. For a one-claim NodePrepareResources that is most of the cost (a no-op
server: about 320-510 us of server CPU per prepare+unprepare cycle, against 140-150 us when one
thread does everything). :class:`LoopServer` drives the same gRPC core (grpcio's
``grpc._cython.cygrpc``: the same HTTP/2, the same wire, the same limits) from one thread:

- a unary method that ``inline(method)`` allows (the fake driver's prepare and unprepare when
  nothing in them waits: claims from a file or memory, no ``--sync-journal``) is answered in
  the queue thread: request message received, handler run, then answer, status and the close
  as one batch;
- every other call (server streams such as the health stream; unary calls that may wait on
  the API server or a disk flush, and must not hold up the others) runs in a thread pool; the
  queue thread only completes its operations.

It serves what the generated ``add_*Servicer_to_server`` functions register
(:meth:`add_registered_method_handlers`); a method not registered is answered UNIMPLEMENTED.
Servicers get a context with ``is_active``, ``abort``, ``set_code`` and ``set_details``.
``stop(grace)`` refuses new calls, cancels what still runs after ``grace`` seconds and returns
an event set once every call is finished, as ``grpc.Server.stop`` does.

Where a call runs changes nothing in what is durable before its answer (``.checkpoint``): by
default every checkpoint record of the call is written before the answer (it survives a crash
of the process, SIGKILL included, not a power loss) and nothing is fsynced on the prepare path
(snapshots are, in the background); with ``--sync-journal`` the journal is fdatasynced before
the answer, and those calls run in the pool, so that concurrent calls share one flush.

``grpc._cython.cygrpc`` is grpcio's private binding: pyproject.toml allows a range of grpcio, at
both ends of which CI runs the tests, and :func:`unavailable` says when the installed one lacks
something used here (the plugin then serves with grpcio's own server).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent import futures
from typing import Any, Callable, Iterable, Mapping, NoReturn

import grpc

from drakit.conformance.crash import log_bug

try:  # grpcio's private core binding: tested at both ends of pyproject.toml's grpcio range
    from grpc._cython import cygrpc
except ImportError:  # pragma: no cover - only with another grpcio build
    cygrpc = None

log = logging.getLogger("drakit.driver")

_SHUTDOWN = ("shutdown",)
_DONE = ("done",)
# what this module uses of grpcio's core binding
_NEEDED = ("CompletionQueue", "Server", "CompletionType", "StatusCode", "ReceiveMessageOperation",
           "ReceiveCloseOnServerOperation", "SendInitialMetadataOperation", "SendMessageOperation",
           "SendStatusFromServerOperation")


def unavailable() -> str | None:
    """Why :class:`LoopServer` cannot run with the installed grpcio (None: it can). The plugin
    then serves with grpcio's own server (``PluginServer``)."""
    if cygrpc is None:
        return f"grpcio {grpc.__version__} has no grpc._cython.cygrpc"
    missing = [name for name in _NEEDED if not hasattr(cygrpc, name)]
    missing += [f"Server.{m}" for m in ("register_method", "request_registered_call", "request_call",
                                         "add_http2_port", "shutdown", "cancel_all_calls", "destroy")
                if hasattr(cygrpc, "Server") and not hasattr(cygrpc.Server, m)]
    return f"grpcio {grpc.__version__}'s core binding lacks {', '.join(missing)}" if missing else None


def _code(code: grpc.StatusCode) -> int:
    return int(code.value[0])


class _Aborted(Exception):
    def __init__(self, code: int, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class _PoolCall:
    """A call handed to the pool: what its thread and the queue thread share."""

    __slots__ = ("call", "cond", "closed", "sending", "sent_ok")

    def __init__(self, call: Any) -> None:
        self.call = call
        self.cond = threading.Condition(threading.Lock())
        self.closed = False   # the call is over (answered, or cancelled by the client)
        self.sending = False
        self.sent_ok = True


class _Context:
    """What a servicer may ask of its call (names as in ``grpc.ServicerContext``)."""

    __slots__ = ("_state", "code", "details")

    def __init__(self, state: _PoolCall | None) -> None:
        self._state = state
        self.code = cygrpc.StatusCode.ok
        self.details = ""

    def is_active(self) -> bool:
        return self._state is None or not self._state.closed

    def abort(self, code: grpc.StatusCode, details: str) -> NoReturn:
        raise _Aborted(_code(code), details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = _code(code)

    def set_details(self, details: str) -> None:
        self.details = details

    def time_remaining(self) -> float | None:
        return None

    def invocation_metadata(self) -> tuple[()]:
        return ()


def _final_ops(initial: bool, code: int, details: str, message: bytes | None, close: bool) -> list[Any]:
    ops: list[Any] = [cygrpc.SendInitialMetadataOperation(None, 0)] if initial else []
    if message is not None:
        ops.append(cygrpc.SendMessageOperation(message, 0))
    ops.append(cygrpc.SendStatusFromServerOperation(None, code, details.encode(), 0))
    if close:
        ops.append(cygrpc.ReceiveCloseOnServerOperation(0))
    return ops


class LoopServer:
    """A gRPC server on one queue thread (plus a pool for calls that may wait); the part of
    ``grpc.Server``'s interface the plugin uses."""

    def __init__(self, max_workers: int, inline: Callable[[str], bool] = lambda method: True,
                 name: str = "drakit-plugin") -> None:
        self.max_workers = max_workers
        self.inline = inline
        self.name = name
        self._cq = cygrpc.CompletionQueue()
        self._server = cygrpc.Server((), False)
        self._server.register_completion_queue(self._cq)
        self._handlers: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._due = 0               # operations started whose completion the queue has not yet given
        self._stage = "new"         # new, started, stopping, stopped
        self._shutdown_done = False
        self._terminated = threading.Event()
        self._pool: futures.ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None

    # -- grpc.Server's interface ---------------------------------------------------------------

    def add_generic_rpc_handlers(self, handlers: Iterable[Any]) -> None:
        """Ignored: the generated code registers the same methods with
        :meth:`add_registered_method_handlers`, and those are what is served."""

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, Any]) -> None:
        if self._stage != "new":
            raise RuntimeError("methods are registered before the server starts")
        for method, handler in handlers.items():
            if handler.request_streaming:
                raise ValueError(f"{service}/{method}: request streams are not served")
            path = f"/{service}/{method}"
            self._server.register_method(path)
            self._handlers[path] = handler

    def add_insecure_port(self, address: str) -> int:
        port = int(self._server.add_http2_port(address.encode()))
        if port == 0:
            raise RuntimeError(f"cannot listen on {address}")
        return port

    def start(self) -> None:
        with self._lock:
            if self._stage != "new":
                raise RuntimeError("server already started")
            self._server.start()
            self._stage = "started"
            for path in self._handlers:
                self._request(path)
            self._request(None)
        self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, grace: float | None) -> threading.Event:
        with self._lock:
            if self._stage == "new":
                self._stage = "stopped"
                self._terminated.set()
            elif self._stage == "started":
                self._stage = "stopping"
                self._due += 1
                self._server.shutdown(self._cq, _SHUTDOWN)
                if not grace:
                    self._server.cancel_all_calls()
                else:
                    timer = threading.Timer(grace, self._cancel_all)
                    timer.daemon = True
                    timer.start()
        return self._terminated

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._terminated.wait(timeout)

    # -- the queue thread ----------------------------------------------------------------------

    def _cancel_all(self) -> None:
        with self._lock:
            if self._stage == "stopping":
                self._server.cancel_all_calls()

    def _request(self, path: str | None) -> None:
        """Ask for the next call of ``path`` (None: of any method not registered); lock held."""
        self._due += 1
        if path is None:
            self._server.request_call(self._cq, self._cq, ("call", None, None))
        else:
            self._server.request_registered_call(self._cq, self._cq, path, ("call", path, self._handlers[path]))

    def _batch(self, call: Any, ops: list[Any], tag: tuple[Any, ...]) -> bool:
        """Start ``ops`` on ``call``; False when the core refused (no completion will come)."""
        with self._lock:
            self._due += 1
        try:
            call.start_server_batch(ops, tag)
            return True
        except Exception as err:
            with self._lock:
                self._due -= 1
            log.debug("gRPC operations not started: %s", err)
            return False

    def _serve(self) -> None:
        poll = self._cq.poll
        timeout = cygrpc.CompletionType.queue_timeout
        while True:
            event = poll(time.time() + 1.0)
            if event.completion_type == timeout:
                continue
            try:
                self._on_event(event)
            except Exception as err:  # a bug here must not end the server
                log_bug(log, "gRPC server event", err)
            with self._lock:
                self._due -= 1
                if self._shutdown_done and self._due == 0:
                    self._server.destroy()
                    self._stage = "stopped"
                    break
            event = None
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        self._terminated.set()

    def _on_event(self, event: Any) -> None:
        tag = event.tag
        kind = tag[0]
        if kind == "done":
            return
        if kind == "call":
            self._on_call(event, tag[1], tag[2])
        elif kind == "message":
            self._on_message(event, tag[1], tag[2], tag[3])
        elif kind == "sent":
            state: _PoolCall = tag[1]
            with state.cond:
                state.sending = False
                state.sent_ok = bool(event.success)
                state.cond.notify_all()
        elif kind == "close":
            state = tag[1]
            with state.cond:
                state.closed = True
                state.cond.notify_all()
        elif kind == "shutdown":
            self._shutdown_done = True

    def _on_call(self, event: Any, path: str | None, handler: Any) -> None:
        with self._lock:
            if self._stage == "started":
                self._request(path)
        if not event.success:
            return
        call = event.call
        if handler is None:
            self._batch(call, _final_ops(True, cygrpc.StatusCode.unimplemented, "Method not found!", None, True),
                        _DONE)
            return
        state = None
        if handler.response_streaming or not self.inline(path or ""):
            state = _PoolCall(call)
            self._batch(call, [cygrpc.ReceiveCloseOnServerOperation(0)], ("close", state))
        self._batch(call, [cygrpc.ReceiveMessageOperation(0)], ("message", call, handler, state))

    def _on_message(self, event: Any, call: Any, handler: Any, state: _PoolCall | None) -> None:
        data = event.batch_operations[0].message() if event.success else None
        request = None
        if data is None:
            code, details = cygrpc.StatusCode.unimplemented, "a unary call requires exactly one request message"
        else:
            try:
                request = handler.request_deserializer(data) if handler.request_deserializer else data
            except Exception:
                code, details = cygrpc.StatusCode.internal, "Exception deserializing request!"
        if request is None:
            if state is None:
                self._batch(call, _final_ops(True, code, details, None, True), _DONE)
            else:
                self._finish(state, _final_ops(True, code, details, None, False))
            return
        if state is None:
            self._batch(call, self._unary(handler, request, _Context(None), True), _DONE)
            return
        if self._pool is None:
            self._pool = futures.ThreadPoolExecutor(self.max_workers, thread_name_prefix=self.name)
        self._pool.submit(self._in_pool, handler, request, state)

    # -- handlers ------------------------------------------------------------------------------

    def _unary(self, handler: Any, request: Any, context: _Context, close: bool) -> list[Any]:
        """The final batch of a unary call: answer and status (and the close, for ``close``)."""
        try:
            response = handler.unary_unary(request, context)
        except _Aborted as aborted:
            return _final_ops(True, aborted.code, aborted.details, None, close)
        except Exception as err:
            log_bug(log, f"{getattr(handler.unary_unary, '__qualname__', 'a gRPC method')} failed", err)
            return _final_ops(True, cygrpc.StatusCode.unknown, f"Exception calling application: {err}", None, close)
        try:
            data = handler.response_serializer(response) if handler.response_serializer else response
        except Exception:
            return _final_ops(True, cygrpc.StatusCode.internal, "Failed to serialize response!", None, close)
        return _final_ops(True, context.code, context.details, data, close)

    def _in_pool(self, handler: Any, request: Any, state: _PoolCall) -> None:
        context = _Context(state)
        try:
            if handler.response_streaming:
                ops = self._stream(handler, request, context, state)
            else:
                ops = self._unary(handler, request, context, False)
            if ops is not None:
                self._finish(state, ops)
        except Exception as err:
            log_bug(log, "gRPC call in the server's pool", err)

    def _stream(self, handler: Any, request: Any, context: _Context, state: _PoolCall) -> list[Any] | None:
        """Send each message the handler yields, waiting for each to go out; the final batch
        (status), or None once the call is over (cancelled)."""
        first = True
        try:
            for response in handler.unary_stream(request, context):
                data = handler.response_serializer(response) if handler.response_serializer else response
                ops = [cygrpc.SendInitialMetadataOperation(None, 0)] if first else []
                first = False
                ops.append(cygrpc.SendMessageOperation(data, 0))
                with state.cond:
                    if state.closed:
                        return None
                    state.sending = True
                    if not self._batch(state.call, ops, ("sent", state)):
                        return None
                    while state.sending and not state.closed:
                        state.cond.wait()
                    if not state.sent_ok or state.closed:
                        return None
        except _Aborted as aborted:
            return _final_ops(first, aborted.code, aborted.details, None, False)
        except Exception as err:
            log_bug(log, f"{getattr(handler.unary_stream, '__qualname__', 'a gRPC stream')} failed", err)
            return _final_ops(first, cygrpc.StatusCode.unknown, f"Exception iterating responses: {err}", None, False)
        return _final_ops(first, context.code, context.details, None, False)

    def _finish(self, state: _PoolCall, ops: list[Any]) -> None:
        with state.cond:
            if not state.closed:
                self._batch(state.call, ops, _DONE)
