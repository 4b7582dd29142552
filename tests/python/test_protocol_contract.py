"""The Python client's side of the protocol contract (env/PROTOCOL.md): sessions belong to
their connection, old clients are told what the server speaks, and a reply that is not a
protocol message raises ProtocolError (never a stray UnicodeDecodeError or a hang).
The fake peer runs on loopback ipc only."""

import os
import tempfile
import threading

import msgpack
import pytest
import zmq

from tiergym_testing import server_fixture

import tiergym  # noqa: E402  (env/python, on sys.path through tiergym_testing)
from tiergym.connection import Connection  # noqa: E402
from tiergym.errors import ProtocolError  # noqa: E402


server = server_fixture("--threads", "2")


def test_a_session_answers_only_on_the_connection_that_made_it(server):
    a = Connection(server.endpoint, timeout=30)
    b = Connection(server.endpoint, timeout=30)
    try:
        session = a.call("make", env=tiergym.ENV_ID, config={"num_regions": 4, "steps": 3})["session"]
        assert isinstance(session, str) and len(session) == 32
        int(session, 16)  # hex digits
        a.call("reset", session=session, seed=1)
        with pytest.raises(tiergym.ServerError) as theirs:
            b.call("step", session=session, action=[0, 0, 0, 0])
        with pytest.raises(tiergym.ServerError) as unknown:
            b.call("step", session="0" * 32, action=[0, 0, 0, 0])
        assert theirs.value.code == unknown.value.code == "NOT_FOUND"
        assert theirs.value.message == unknown.value.message
        assert a.call("step", session=session, action=[1, 0, 0, 0])["ok"]  # the owner goes on
    finally:
        a.close()
        b.close()


def test_an_old_client_is_told_which_version_the_server_speaks(server):
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(server.endpoint)
    try:
        socket.send(msgpack.packb({"v": 1, "op": "hello", "id": 1}))
        assert socket.poll(10000)
        assert msgpack.unpackb(socket.recv())["protocol"] == tiergym.VERSION == 2
        socket.send(msgpack.packb({"v": 1, "op": "list", "id": 2}))
        assert socket.poll(10000)
        error = msgpack.unpackb(socket.recv())["error"]
        assert error["code"] == "FAILED_PRECONDITION" and error["field"] == "v"
    finally:
        socket.close()


@pytest.mark.parametrize("reply", [
    b"\xc1 not msgpack",
    msgpack.packb([1, 2, 3]),
    # A string that is not UTF-8 where the error text should be.
    b"\x84\xa1v\x02\xa2id\x02\xa2ok\xc2\xa5error\x83\xa4code\xa9NOT_FOUND\xa5field\xa1x"
    b"\xa7message\xa2\xff\xfe",
])
def test_a_reply_that_is_not_a_protocol_message_raises_protocol_error(reply):
    directory = tempfile.mkdtemp(prefix="tiergym-fake-")
    endpoint = f"ipc://{directory}/fake.sock"
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(endpoint)

    def serve():
        # hello, properly; then the reply under test.
        for answer in (None, reply):
            if not router.poll(10000):
                return
            identity, payload = router.recv_multipart()
            request = msgpack.unpackb(payload)
            if answer is None:
                answer = msgpack.packb({"v": 2, "id": request["id"], "ok": True, "protocol": 2,
                                        "server": "fake", "envs": [], "limits": {}})
            router.send_multipart([identity, answer])

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        connection = Connection(endpoint, timeout=10)
        with pytest.raises(ProtocolError):
            connection.call("stats")
        connection.close()
    finally:
        thread.join(timeout=20)
        router.close()
        os.unlink(f"{directory}/fake.sock") if os.path.exists(f"{directory}/fake.sock") else None
        os.rmdir(directory)
