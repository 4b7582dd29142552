"""CURVE (ZeroMQ's authentication and encryption) end to end: `tiergym keygen` writes key
pairs that pyzmq reads; `tiergym serve` refuses a secret key others may read and a network
endpoint without CURVE (unless --insecure-open, which it then says); the Python clients
(single, vector with its shared-memory control channel, co-scheduled) work with the allowed
key and get NotAuthorized, quickly, without it."""

import os
import stat
import subprocess
import time

import numpy as np
import pytest
import zmq
import zmq.auth

import tiergym
from tiergym import cosched
from tiergym_testing import BINARY, needs_binary

pytestmark = [needs_binary,
              pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq has no CURVE")]

CONFIG = {"num_regions": 8, "steps": 5}


def keygen(directory, name):
    out = subprocess.run([BINARY, "keygen", name, "--dir", str(directory)], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return directory / f"{name}.key", directory / f"{name}.key_secret", out.stdout


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("curve") / "keys"
    server = keygen(d, "server")
    learner = keygen(d, "learner")
    stranger = keygen(d, "stranger")
    return {"dir": d, "server": server, "learner": learner, "stranger": stranger}


@pytest.fixture(scope="module")
def server(keys):
    s = tiergym.Server(args=["--threads", "2", "--curve-key", str(keys["server"][1]),
                             "--curve-clients", str(keys["learner"][0]),
                             "--sensitivity", cosched.bundled_curves()])
    yield s
    s.close()


def learner(keys):
    return {"server_key": str(keys["server"][0]), "key": str(keys["learner"][1])}


def test_keygen_writes_private_certificates_that_pyzmq_reads(keys):
    public, secret, stdout = keys["server"]
    assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(public).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(keys["dir"]).st_mode) == 0o700
    pub, sec = zmq.auth.load_certificate(str(secret))
    assert zmq.auth.load_certificate(str(public)) == (pub, None)
    assert zmq.curve_public(sec) == pub
    assert f"public key: {pub.decode()}" in stdout
    # Never over an existing pair.
    out = subprocess.run([BINARY, "keygen", "server", "--dir", str(keys["dir"])],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1 and "--force" in out.stderr


def serve(*args, timeout=60):
    return subprocess.run([BINARY, "serve", "--quiet", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_the_server_refuses_a_secret_key_others_may_read(keys, tmp_path):
    leaky = tmp_path / "leaky.key_secret"
    leaky.write_bytes(keys["server"][1].read_bytes())
    leaky.chmod(0o644)
    out = serve("--endpoint", f"ipc://{tmp_path}/s.sock", "--curve-key", str(leaky),
                "--curve-clients", str(keys["learner"][0]))
    assert out.returncode == 1
    assert "open to others" in out.stderr and f"chmod 600 {leaky}" in out.stderr
    # The two options go together; a public certificate is not a secret one.
    out = serve("--curve-key", str(keys["server"][1]))
    assert out.returncode == 2 and "--curve-clients" in out.stderr
    out = serve("--endpoint", f"ipc://{tmp_path}/s.sock", "--curve-key", str(keys["server"][0]),
                "--curve-clients", str(keys["learner"][0]))
    assert out.returncode == 1 and "key_secret" in out.stderr


def test_a_network_endpoint_without_curve_starts_only_when_opened_on_purpose(keys):
    out = serve("--endpoint", "tcp://0.0.0.0:0")
    assert out.returncode == 1
    assert "reachable from other machines" in out.stderr and "--insecure-open" in out.stderr
    # Opened on purpose: it starts, and says so whatever --quiet says.
    p = subprocess.Popen([BINARY, "serve", "--quiet", "--endpoint", "tcp://0.0.0.0:0",
                          "--insecure-open"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("listening on tcp://0.0.0.0:"), line
    finally:
        p.terminate()
        _, err = p.communicate(timeout=30)
    assert "OPEN (--insecure-open)" in err and "in the clear" in err


def test_the_allowed_learner_runs_episodes(server, keys):
    env = tiergym.make(address=server.endpoint, curve=learner(keys), **CONFIG)
    try:
        obs, info = env.reset(seed=1)
        total = 0.0
        for _ in range(CONFIG["steps"]):
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            total += reward
        assert terminated and np.isfinite(total)
    finally:
        env.close()
    # Z85 keys directly, too.
    server_public, _ = zmq.auth.load_certificate(str(keys["server"][0]))
    public, secret = zmq.auth.load_certificate(str(keys["learner"][1]))
    c = tiergym.Connection(server.endpoint, curve={"server_key": server_public.decode(),
                                                   "public_key": public, "secret_key": secret})
    assert c.call("stats")["ok"]
    c.close()


def test_strangers_are_refused_quickly_and_say_why(server, keys):
    # No CURVE here: the mechanisms disagree (or the server closes the connection first).
    start = time.monotonic()
    with pytest.raises((tiergym.NotAuthorized, tiergym.ServerUnavailable)) as e:
        tiergym.Connection(server.endpoint, timeout=30)
    assert "CURVE" in str(e.value)
    # A key pair the server does not list.
    with pytest.raises(tiergym.NotAuthorized) as e:
        tiergym.Connection(server.endpoint, timeout=30,
                           curve={"server_key": str(keys["server"][0]),
                                  "key": str(keys["stranger"][1])})
    assert "--curve-clients" in str(e.value)
    assert time.monotonic() - start < 20  # neither waited for its timeout
    # Another server's public key: the handshake never completes, nothing answers.
    with pytest.raises(tiergym.ServerUnavailable) as e:
        tiergym.Connection(server.endpoint, timeout=2,
                           curve={"server_key": str(keys["stranger"][0]),
                                  "key": str(keys["learner"][1])})
    assert "public key" in str(e.value) or "no reply" in str(e.value)


def test_a_client_secret_key_others_may_read_is_refused(keys, tmp_path):
    leaky = tmp_path / "learner.key_secret"
    leaky.write_bytes(keys["learner"][1].read_bytes())
    leaky.chmod(0o640)
    with pytest.raises(ValueError) as e:
        tiergym.curve_keys({"server_key": str(keys["server"][0]), "key": str(leaky)})
    assert f"chmod 600 {leaky}" in str(e.value)
    with pytest.raises(ValueError):
        tiergym.curve_keys({"server_key": str(keys["server"][0]), "key": str(keys["learner"][0])})
    with pytest.raises(ValueError):  # curve= is for a server given by address
        tiergym.make(curve=learner(keys), **CONFIG)


def test_the_vector_env_and_its_shared_memory_control_channel(server, keys):
    plain = tiergym.VectorEnv(3, address=server.endpoint, curve=learner(keys), shm=False,
                              **CONFIG)
    shm = tiergym.VectorEnv(3, address=server.endpoint, curve=learner(keys), shm=True, **CONFIG)
    try:
        a = plain.reset(seed=5)[0]
        b = shm.reset(seed=5)[0]
        assert shm.shm and np.array_equal(a, b)
        for _ in range(CONFIG["steps"] + 2):
            actions = plain.action_space.sample()
            ra = plain.step(actions)
            rb = shm.step(actions)
            for x, y in zip(ra[:4], rb[:4]):
                assert np.array_equal(x, y)
    finally:
        plain.close()
        shm.close()


def test_a_cosched_node_over_curve(server, keys):
    env = cosched.SchedulerEnv("knl-2", address=server.endpoint, curve=learner(keys),
                               num_regions=4, steps=3)
    try:
        env.reset(seed=0)
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert np.isfinite(reward) and not truncated
    finally:
        env.close()


def test_rllib_env_runners_take_the_keys_from_their_config(server, keys):
    # agents_examples/rllib_env.py's env creator (what each RLlib env runner calls), with
    # the keys its --curve-server-key and --curve-key put in env_config; no Ray needed.
    import importlib.util
    from tiergym_testing import REPO
    spec = importlib.util.spec_from_file_location(
        "rllib_env_for_curve", REPO / "agents_examples" / "rllib_env.py")
    rllib_env = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rllib_env)
    env = rllib_env.env_creator({"addresses": server.endpoint, "curve": learner(keys),
                                 "tiergym": CONFIG, "worker_index": 1})
    try:
        env.reset(seed=0)
        assert np.isfinite(env.step(env.action_space.sample())[1])
    finally:
        env.close()
    with pytest.raises(tiergym.NotAuthorized):
        rllib_env.env_creator({"addresses": server.endpoint, "tiergym": CONFIG,
                               "curve": {"server_key": str(keys["server"][0]),
                                         "key": str(keys["stranger"][1])}})
