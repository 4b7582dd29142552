"""step_batch results through shared memory (env/PROTOCOL.md "Shared memory";
env/python/tiergym/_shm.py): tiergym.VectorEnv gives the same episodes, bit for bit, with
the results in shared memory as with the results in the replies, in the three autoreset
modes (partial resets included), with and without copies; it chooses shared memory for
local servers only; the segments leave nothing in /dev/shm once mapped and are freed when
the environment closes or its process dies. A batch whose success the segment's ready signal
announces (a futex) gets no reply and gives the same episodes. Steps written into the segment
(no message at all; PROTOCOL.md "Requests through the segment") give the same episodes and
the same errors; garbage a client writes there is an error naming the array, threads are
bounded and end with their segment, a client that dies mid-request frees its thread. The
waits on the segment's words go through the compiled extension when the package has it and
through ctypes otherwise, with the same episodes."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tiergym_testing import needs_binary, server_fixture
from test_inprocess import (CONFIG, CONFIGS, assert_same_outputs, assert_same_steps,
                            assert_same_vector_env)
import tiergym
from tiergym import _shm
from tiergym._shm import is_local
from tiergym.connection import Connection

server = server_fixture("--threads", "2")


def stats(server):
    c = Connection(server.endpoint)
    try:
        return c.call("stats")
    finally:
        c.close()


def tiergym_segments():
    return sorted(n for n in os.listdir("/dev/shm") if n.startswith("tiergym-"))


def stats_once_freed(server, counter, seconds=10, also=()):
    """The server's stats once `counter` and the keys in `also` (stats keys) fell to 0, or
    after `seconds`: a segment's thread ends within its poll (100 ms) of the segment's
    freeing, later on a loaded machine, and the segment's bytes are released only when its
    thread lets go of it, after the segment has left the server's table (`shm_segments`)."""
    keys = (counter, *also)
    deadline = time.monotonic() + seconds
    while any(stats(server)[k] != 0 for k in keys) and time.monotonic() < deadline:
        time.sleep(0.05)
    return stats(server)


def kill_and_wait_until_freed(server, script, counter, settle_s=0.0, also=()):
    """Runs `script`, a client that prints "ready" once it holds what `counter` (a stats
    key) counts, checks the server counts one, kills the client with SIGKILL and waits (10 s
    at most) for the count, and the keys in `also`, to fall to 0: the server's stats then."""
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(settle_s)
        assert stats(server)[counter] == 1
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        return stats_once_freed(server, counter, also=also)
    finally:
        child.kill()
        child.wait()
        child.stdout.close()


def test_only_local_addresses_are_local():
    assert is_local("ipc:///tmp/x.sock")
    assert is_local("tcp://127.0.0.1:5555") and is_local("tcp://127.3.4.5:1")
    assert is_local("tcp://localhost:5555") and is_local("tcp://[::1]:5555")
    assert not is_local("tcp://10.1.2.3:5555")
    assert not is_local("tcp://example.org:5555")


@needs_binary
@pytest.mark.parametrize("mode", [tiergym.NEXT_STEP, tiergym.SAME_STEP, tiergym.DISABLED])
@pytest.mark.parametrize("copy", [False, True])
def test_episodes_are_bit_identical_to_results_in_the_replies(server, mode, copy):
    n = len(CONFIGS)
    plain = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                              shm=False, **CONFIG)
    shared = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                               shm=True, copy=copy, **CONFIG)
    try:
        assert_same_vector_env(shared, plain)
        seeds = [11, 12, 13, 14, 15]
        assert_same_outputs(shared.reset(seed=seeds), plain.reset(seed=seeds), "reset")
        assert shared.shm and not plain.shm
        assert shared._shared.requests == _shm.requests_supported()  # steps: no message
        same = [None, 12, None, None, None]
        assert_same_outputs(shared.reset(seed=same, options={"profile": 1}),
                            plain.reset(seed=same, options={"profile": 1}), "reset again")

        def segment_arrays_are_read_only(out):
            if not copy:
                assert not out[0].flags.writeable  # the segment's own array, read-only

        assert_same_steps(shared, plain, mode, segment_arrays_are_read_only)
    finally:
        plain.close()
        shared.close()


@needs_binary
@pytest.mark.parametrize("waits", ["compiled", "ctypes"])
def test_the_waits_through_the_extension_and_through_ctypes_give_the_same_episodes(
        server, waits, monkeypatch):
    # The futex calls and the spin on seq: tiergym._core's when the package has it, else
    # ctypes' (both must serve).
    if waits == "compiled" and _shm._native_waits() is None:
        pytest.skip("tiergym._core (with wait_seq) is not built")
    monkeypatch.setattr(_shm, "_native", [None] if waits == "ctypes" else [])
    n = len(CONFIGS)
    mode = tiergym.SAME_STEP
    plain = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                              shm=False, **CONFIG)
    shared = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                               shm=True, copy=False, **CONFIG)
    try:
        seeds = [21, 22, 23, 24, 25]
        assert_same_outputs(shared.reset(seed=seeds), plain.reset(seed=seeds), "reset")
        assert shared.shm and (shared._shared._native is None) == (waits == "ctypes")
        assert_same_steps(shared, plain, mode)
    finally:
        plain.close()
        shared.close()


def test_a_request_waits_the_way_that_was_faster_lately():
    # Each way once, then the faster; the other again after TRY_OTHER_AFTER uses, then after
    # twice as many while it stays slower; a change of times changes the choice.
    w = _shm._TwoWays()
    took = {0: 100e-6, 1: 50e-6}
    ways = []
    for _ in range(2 + 3 * w.TRY_OTHER_AFTER + 3):
        ways.append(w.choose())
        w.took(ways[-1], took[ways[-1]])
    assert ways[:2] == [0, 1]
    slow = [i - 2 for i, way in enumerate(ways) if way == 0 and i >= 2]
    assert slow == [w.TRY_OTHER_AFTER - 1, 3 * w.TRY_OTHER_AFTER - 1]
    took[1] = 400e-6  # the faster way became slow: after a few uses the other is taken
    ways = []
    for _ in range(40):
        ways.append(w.choose())
        w.took(ways[-1], took[ways[-1]])
    assert ways[-10:] == [0] * 10


@needs_binary
def test_the_ready_signal_stands_for_the_replies_of_the_batches_that_succeed(server):
    n = len(CONFIGS)
    mode = tiergym.SAME_STEP  # final rows too (has_final)
    signalled = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                                  shm=True, copy=False, **CONFIG)
    replied = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                                shm=True, copy=False, **CONFIG)
    replied._use_signal = False  # every batch answered, as by a server without the signal
    signalled._use_requests = replied._use_requests = False  # steps as messages
    calls = []
    call_signalled = signalled._connection.call_signalled

    def counting(op, ready, timeout=None, **fields):
        reply = call_signalled(op, ready, timeout, **fields)
        calls.append((op, ready is not None, reply))
        return reply

    signalled._connection.call_signalled = counting
    try:
        seeds = [21, 22, 23, 24, 25]
        assert_same_outputs(signalled.reset(seed=seeds), replied.reset(seed=seeds), "reset")
        assert signalled._shared.signal and replied._shared.signal
        assert_same_steps(signalled, replied, mode)
        stepped = [c for c in calls if c[0] == "step_batch"]
        assert len(stepped) >= 30
        assert all(waited and reply is None for _, waited, reply in stepped[1:]), \
            "after the batch that made the segment, no step_batch got a reply"
        # A batch that fails is a reply (an error), at once; the episodes go on.
        started = time.monotonic()
        with pytest.raises(tiergym.ServerError) as e:
            signalled.step(np.full((n, CONFIG["num_regions"]), 9))
        assert time.monotonic() - started < 5
        assert e.value.field.startswith("actions[0]")
        actions = np.zeros((n, CONFIG["num_regions"]), dtype=np.int64)
        assert_same_outputs(signalled.step(actions), replied.step(actions), "after the error")
    finally:
        signalled.close()
        replied.close()


@needs_binary
def test_a_signalled_batch_not_seen_in_time_is_never_taken_for_the_next(server):
    n = 4
    signalled = tiergym.VectorEnv(n, address=server, shm=True, copy=False, **CONFIG)
    signalled._use_requests = False  # steps as messages, answered by the signal
    replied = tiergym.VectorEnv(n, address=server, shm=False, **CONFIG)
    try:
        assert_same_outputs(signalled.reset(seed=3), replied.reset(seed=3), "reset")
        actions = np.zeros((n, CONFIG["num_regions"]), dtype=np.int64)
        assert_same_outputs(signalled.step(actions), replied.step(actions), "step 1")
        # The signal is missed (as by a client that gave up waiting): the server has
        # stepped the batch all the same; the next batch must not be taken for it.
        shared = signalled._shared
        shared.wait = lambda seq, seconds: False
        signalled._connection.timeout = 0.2
        with pytest.raises(tiergym.ServerUnavailable):
            signalled.step(actions)
        replied.step(actions)
        assert signalled._use_signal is False
        del shared.wait
        signalled._connection.timeout = 30
        actions[:, 0] = 1
        assert_same_outputs(signalled.step(actions), replied.step(actions), "after the miss")
    finally:
        signalled.close()
        replied.close()


@needs_binary
@pytest.mark.alone  # counts every tiergym segment in /dev/shm
def test_segments_leave_no_name_and_go_with_the_environment(server):
    before = tiergym_segments()
    envs = tiergym.VectorEnv(4, address=server, **CONFIG)  # shm chosen by itself: ipc
    try:
        envs.reset(seed=1)
        assert envs.shm
        assert len(tiergym_segments()) == len(before) + 1  # named until first used
        envs.step(np.zeros((4, 16), dtype=np.int64))
        assert tiergym_segments() == before  # unlinked: only the two mappings remain
        s = stats(server)
        assert s["shm_segments"] >= 1 and s["shm_bytes"] > 0
    finally:
        envs.close()
    assert stats(server)["shm_segments"] == 0


@needs_binary
def test_a_client_that_dies_has_its_segments_freed(server):
    script = textwrap.dedent(f"""
        import sys, time
        import numpy as np
        import tiergym
        envs = tiergym.VectorEnv(8, address={server.endpoint!r}, shm=True, num_regions=16)
        envs.reset(seed=3)
        envs.step(np.zeros((8, 16), dtype=np.int64))
        print("ready", flush=True)
        time.sleep(60)
    """)
    s = kill_and_wait_until_freed(server, script, "shm_segments", also=("shm_bytes",))
    assert s["shm_segments"] == 0 and s["shm_bytes"] == 0


@needs_binary
def test_shm_true_needs_a_server_that_offers_it():
    s = tiergym.Server(args=["--threads", "1", "--max-shm-mib", "0"])
    try:
        with pytest.raises(ValueError, match="offers no shared memory"):
            tiergym.VectorEnv(2, address=s, shm=True, num_regions=4)
        envs = tiergym.VectorEnv(2, address=s, num_regions=4)  # automatic: replies
        try:
            envs.reset(seed=0)
            envs.step(np.zeros((2, 4), dtype=np.int64))
            assert not envs.shm
        finally:
            envs.close()
    finally:
        s.close()


needs_requests = pytest.mark.skipif(not _shm.requests_supported(),
                                    reason="requests through shared memory need x86-64 and "
                                           "the futex call")


def bump(shared):
    """Writes nothing, bumps the request number as a client would, wakes the server's
    thread and waits for its batch: the error code it wrote ("" when none)."""
    seq = shared.last_seq + 1
    shared.arrays["request"][0] += np.uint64(1)
    _shm._futex_wake(shared.arrays["request"].ctypes.data)
    assert shared.wait(seq, 10)
    shared.last_seq = seq
    return _shm._text(shared.arrays["error_code"]), _shm._text(shared.arrays["error_field"])


@needs_binary
@needs_requests
@pytest.mark.parametrize("mode", [tiergym.NEXT_STEP, tiergym.SAME_STEP, tiergym.DISABLED])
def test_steps_written_into_the_segment_send_no_message_and_match_the_signal(server, mode):
    n = len(CONFIGS)
    written = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                                shm=True, copy=False, **CONFIG)
    signalled = tiergym.VectorEnv(n, address=server, autoreset_mode=mode, configs=CONFIGS,
                                  shm=True, copy=False, **CONFIG)
    signalled._use_requests = False
    sent = []  # every message the written environment sends (call() goes through here)
    call_signalled = written._connection.call_signalled

    def counting(op, *args, **fields):
        sent.append(op)
        return call_signalled(op, *args, **fields)
    written._connection.call_signalled = counting
    try:
        seeds = [31, 32, 33, 34, 35]
        assert_same_outputs(written.reset(seed=seeds), signalled.reset(seed=seeds), "reset")
        assert written._shared.requests and not signalled._shared.requests
        resets = []  # resets (of some sub-environments: mode disabled) are messages
        reset = written.reset
        written.reset = lambda **kw: (resets.append(1), reset(**kw))[1]
        made = len(sent)
        assert_same_steps(written, signalled, mode)
        assert len(sent) == made + len(resets), "no step went as a message"
        assert stats(server)["shm_request_threads"] >= 1
        # Partial and seeded resets still go as messages, into the same segment.
        assert_same_outputs(written.reset(seed=[1, None, 2, None, 3]),
                            signalled.reset(seed=[1, None, 2, None, 3]), "seeded reset")
        actions = np.ones((n, CONFIG["num_regions"]), dtype=np.int64)
        assert_same_outputs(written.step(actions), signalled.step(actions), "after the reset")
    finally:
        written.close()
        signalled.close()
    assert stats_once_freed(server, "shm_request_threads")["shm_request_threads"] == 0


@needs_binary
@needs_requests
def test_errors_through_the_segment_are_the_errors_of_the_replies(server):
    n = 4
    written = tiergym.VectorEnv(n, address=server, shm=True, copy=False, **CONFIG)
    replied = tiergym.VectorEnv(n, address=server, shm=False, **CONFIG)
    try:
        assert_same_outputs(written.reset(seed=5), replied.reset(seed=5), "reset")
        assert written._shared.requests
        bad = np.zeros((n, CONFIG["num_regions"]), dtype=np.int64)
        bad[2, 3] = 9
        errors = []
        for envs in (written, replied):
            started = time.monotonic()
            with pytest.raises(tiergym.ServerError) as e:
                envs.step(bad)
            assert time.monotonic() - started < 5
            errors.append((e.value.code, e.value.field, e.value.message))
        assert errors[0] == errors[1]
        assert errors[0][:2] == ("INVALID_ARGUMENT", "actions[2][3]")
        # Nothing moved: the episodes go on alike.
        actions = np.zeros((n, CONFIG["num_regions"]), dtype=np.int64)
        assert_same_outputs(written.step(actions), replied.step(actions), "after the error")
    finally:
        written.close()
        replied.close()


@needs_binary
@needs_requests
def test_garbage_written_into_the_segment_is_an_error_naming_the_array(server):
    n = 3
    envs = tiergym.VectorEnv(n, address=server, shm=True, copy=False, **CONFIG)
    twin = tiergym.VectorEnv(n, address=server, shm=False, **CONFIG)
    try:
        envs.reset(seed=8)
        twin.reset(seed=8)
        shared = envs._shared
        a = shared.arrays
        a["request_actions"][:] = 0
        a["request_reset"][:] = 0
        a["request_autoreset"][0] = 77
        assert bump(shared) == ("INVALID_ARGUMENT", "request_autoreset")
        a["request_autoreset"][0] = 0
        a["request_reset"][1] = 2
        assert bump(shared) == ("INVALID_ARGUMENT", "request_reset[1]")
        a["request_reset"][1] = 0
        for value in (-1, 2**62, -2**63, 3):
            a["request_actions"][2, 5] = value
            assert bump(shared) == ("INVALID_ARGUMENT", "request_actions[2][5]"), value
        a["request_actions"][2, 5] = 0
        # The results are not the client's to write (read-only views), and nothing moved.
        with pytest.raises(ValueError):
            a["obs"][0, 0] = 1
        actions = np.zeros((n, CONFIG["num_regions"]), dtype=np.int64)
        assert_same_outputs(envs.step(actions), twin.step(actions), "after the garbage")
    finally:
        envs.close()
        twin.close()


@needs_binary
@needs_requests
def test_request_threads_are_bounded_and_a_dead_client_frees_its_thread():
    s = tiergym.Server(args=["--threads", "2", "--max-shm-request-threads", "1"])
    try:
        c = Connection(s.endpoint)
        try:
            assert c.hello["limits"]["max_shm_request_threads"] == 1
        finally:
            c.close()
        first = tiergym.VectorEnv(2, address=s, shm=True, num_regions=4)
        second = tiergym.VectorEnv(2, address=s, shm=True, num_regions=4)
        plain = tiergym.VectorEnv(2, address=s, shm=False, num_regions=4)
        try:
            for envs in (first, second, plain):
                envs.reset(seed=4)
            assert first._shared.requests and not second._shared.requests  # no thread left
            assert stats(s)["shm_request_threads"] == 1
            actions = np.ones((2, 4), dtype=np.int64)
            for _ in range(3):
                out = [envs.step(actions) for envs in (first, second, plain)]
                assert_same_outputs(out[0], out[2], "with a thread")
                assert_same_outputs(out[1], out[2], "without")
        finally:
            first.close()
            second.close()
            plain.close()
        assert stats_once_freed(s, "shm_request_threads")["shm_request_threads"] == 0
        # A client killed while the server's thread waits for (or serves) its requests.
        script = textwrap.dedent(f"""
            import time
            import numpy as np
            import tiergym
            envs = tiergym.VectorEnv(8, address={s.endpoint!r}, shm=True, num_regions=16)
            envs.reset(seed=3)
            assert envs._shared.requests
            print("ready", flush=True)
            while True:
                envs.step(np.zeros((8, 16), dtype=np.int64))
        """)
        st = kill_and_wait_until_freed(s, script, "shm_request_threads", settle_s=0.2)
        assert st["shm_request_threads"] == 0 and st["shm_segments"] == 0
    finally:
        s.close()
