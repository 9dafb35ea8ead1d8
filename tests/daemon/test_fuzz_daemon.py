"""Hypothesis against a live daemon process: random bytes and random requests never kill it.

Each example opens a connection, sends what hypothesis made, ends its side, and reads what
comes back until the daemon closes; then a second connection checks it still answers. Requests always get a response
with their msgid (a result, or an error with a code from the table); bytes that are not
msgpack-RPC get an error and at most the offending connection is closed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.protocol import METHODS, Client, ErrorCode, RpcError, pack

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
_CODES = {int(c) for c in ErrorCode}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A daemon process on its own socket, for the whole module."""
    folder = Path(tempfile.mkdtemp(prefix="roost-fuzz-", dir="/tmp"))
    state = tmp_path_factory.mktemp("fuzz-state")
    path = str(folder / "s.sock")
    env = {**os.environ, "XDG_STATE_HOME": str(state), "ROOST_SOCKET": path}
    env.pop("ANTHROPIC_API_KEY", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "roost.daemon", "--socket", path, "--database", str(state / "db")],
        env=env,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 15
    while not os.path.exists(path):
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "daemon did not start"
        time.sleep(0.01)
    try:
        yield path
    finally:
        process.terminate()
        process.wait(10)
        if process.stderr:
            process.stderr.close()
        shutil.rmtree(folder, ignore_errors=True)


def _exchange(path: str, data: bytes) -> list[Any]:
    """Send ``data`` and end our side; read everything until the daemon closes."""
    out: list[Any] = []
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(path)
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        try:
            while chunk := sock.recv(65536):
                unpacker.feed(chunk)
                out.extend(unpacker)
        except ConnectionResetError:
            pass
    return out


def _still_alive(path: str) -> None:
    with Client.connect(path, timeout=5) as client:
        assert client.call("status")["pid"] > 0


@FUZZ
@given(data=st.binary(min_size=1, max_size=2048))
def test_random_bytes(live: str, data: bytes) -> None:
    for message in _exchange(live, data):
        # Whatever comes back is a well-formed response or error notice, never a traceback.
        assert message[0] in (1, 2)
        error = message[2] if message[0] == 1 else message[2][0]
        if error is not None:
            assert error["code"] in _CODES and "Traceback" not in error["message"]
    _still_alive(live)


def _not_shutdown(method: str) -> bool:
    # The module's daemon is shared: no request may stop it. Hypothesis also draws strings
    # from the code's own constants, "shutdown" among them, so made-up names are checked too.
    return method != "shutdown"


_SAFE = sorted(m.name for m in METHODS if _not_shutdown(m.name))
_PARAM_NAMES = sorted({p.name for m in METHODS for p in m.params} | {"x"})
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=20) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_params = st.one_of(
    st.dictionaries(st.sampled_from(_PARAM_NAMES), _values, max_size=4).map(lambda d: [d]),
    st.lists(_values, max_size=3),
)


@FUZZ
@given(
    requests=st.lists(
        st.tuples(st.sampled_from(_SAFE) | st.text(max_size=12).filter(_not_shutdown), _params),
        min_size=1,
        max_size=5,
    )
)
def test_random_requests_get_answers_with_their_msgids(live: str, requests: list) -> None:
    data = b"".join(pack([0, i, method, params]) for i, (method, params) in enumerate(requests))
    responses = [m for m in _exchange(live, data) if m[0] == 1]
    assert sorted(r[1] for r in responses) == list(range(len(requests)))
    for _, _, error, _ in responses:
        if error is not None:
            assert error["code"] in _CODES and error["message"]
    _still_alive(live)


#: Values a careless or hostile client sends: nil, not-a-number, too big, a NUL in a string,
#: empty and wrongly-shaped containers.
_ODD_VALUES = (
    None, float("nan"), float("inf"), -float("inf"), 2**63, -(2**63), 2**64 - 1, -1, 1e308,
    "\0", "a\0b", "", [], {}, {"k": []}, [None], [{"x": 1}], True, b"\xff",
)
#: Valid values for required params, so that the odd one reaches the handler.
_VALID = {"task": "t", "text": "t", "name": "default", "call_id": "c", "decision": "deny", "answer": "a",
          "folder": "/nonexistent-folder", "message": "m", "older_than": 1e9, "run": "r"}


def test_every_param_of_every_method_answers_odd_values_without_an_internal_error(live: str) -> None:
    folder = tempfile.mkdtemp(dir="/tmp")
    valid = {**_VALID, "cwd": folder}
    with Client.connect(live, timeout=20) as client:
        session = client.call("sessions.create", cwd=folder)["session"]
        internal = []
        for method in METHODS:
            if not _not_shutdown(method.name):
                continue
            required = {p.name: (session if p.name == "session" else valid.get(p.name, "x")) for p in method.params if p.required}
            for param in method.params:
                for value in _ODD_VALUES:
                    params = {**required, param.name: value}
                    if method.name == "dispatch":
                        params.setdefault("session", session)
                    try:
                        client.call(method.name, **params)
                    except RpcError as exc:
                        if exc.code == ErrorCode.INTERNAL:
                            internal.append((method.name, param.name, value, exc.message))
                    if method.name in ("dispatch", "chat", "compact"):
                        try:
                            client.call("abort", session=session)
                        except RpcError:
                            pass
    assert not internal, "\n".join(map(repr, internal))
    _still_alive(live)


def test_a_param_no_method_has_is_refused_by_name(live: str) -> None:
    with Client.connect(live, timeout=20) as client:
        session = client.call("sessions.create", cwd=tempfile.mkdtemp(dir="/tmp"))["session"]
        with pytest.raises(RpcError) as caught:
            client.call("permission.respond", session=session, call_id="c", desicion="approve")
    assert caught.value.code == ErrorCode.INVALID_PARAMS
    assert "permission.respond has no param 'desicion'" in caught.value.message and "decision" in caught.value.message
