"""Co-scheduled tenants over ZeroMQ (tiergym.cosched with address=, the cosched_* ops of
env/PROTOCOL.md): the same episodes as in this process, bit for bit; PettingZoo's and
Gymnasium's checkers over the protocol; refusals on their fields."""

import numpy as np
import pytest

from tiergym import cosched
from tiergym.connection import Server
from tiergym.errors import ServerError
from tiergym.inprocess import have_core

pytestmark = pytest.mark.skipif(not have_core(), reason="the extension tiergym._core is not built")

SMALL = {"num_regions": 8, "steps": 12}


@pytest.fixture(scope="module")
def server():
    """One private server for the module (it serves the bundled knl profiles and curves)."""
    s = Server(args=["--sensitivity", cosched.bundled_curves()])
    yield s
    s.close()


def episode(env, seed, rng):
    """Every observation, reward and termination of one episode under actions from `rng`."""
    observations, _ = env.reset(seed=seed)
    trace = [dict(observations)]
    while env.agents:
        actions = {a: rng.integers(0, env.action_space(a).nvec) for a in env.agents
                   if rng.random() > 0.2}  # some agents keep their placement
        observations, rewards, terminations, _, infos = env.step(actions)
        trace.append((dict(observations), dict(rewards), dict(terminations),
                      {a: (i["interval_ns"], i["solo_interval_ns"], tuple(i["slowdown"]))
                       for a, i in infos.items()}))
    return trace


def same(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            same(a[k], b[k])
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b)  # bit for bit
    else:
        assert a == b


@pytest.mark.parametrize("seed", [0, 5])
def test_zmq_episodes_are_the_in_process_episodes_bit_for_bit(server, seed):
    config = dict(SMALL, tenant_start_steps="0,3", start_jitter_steps=2)
    here = cosched.parallel_env(scenario="knl-2", **config)
    there = cosched.parallel_env(scenario="knl-2", address=server, **config)
    assert there.possible_agents == here.possible_agents
    assert there.observation_space("minife") == here.observation_space("minife")
    assert there.action_space("minife") == here.action_space("minife")
    same(episode(there, seed, np.random.default_rng(seed)),
         episode(here, seed, np.random.default_rng(seed)))
    there.close()
    here.close()


def test_the_scheduler_view_over_zmq_is_the_in_process_one(server):
    here = cosched.SchedulerEnv(scenario="knl-2", objective="geomean", **SMALL)
    there = cosched.SchedulerEnv(scenario="knl-2", objective="geomean", address=server, **SMALL)
    rng = np.random.default_rng(3)
    a, _ = here.reset(seed=3)
    b, _ = there.reset(seed=3)
    same(b, a)
    done = False
    while not done:
        action = rng.integers(0, here.action_space.nvec)
        a, ra, done, _, ia = here.step(action)
        b, rb, done_b, _, ib = there.step(action)
        same(b, a)
        assert rb == ra and done_b == done
        assert ib["qos_shortfall"] == ia["qos_shortfall"]
    there.close()


def test_pettingzoo_parallel_api_test_passes_over_zmq(server):
    from pettingzoo.test import parallel_api_test
    env = cosched.parallel_env(scenario="knl-2", address=server, tenant_start_steps="0,3",
                               **SMALL)
    parallel_api_test(env, num_cycles=40)
    env.close()


def test_gymnasium_check_env_passes_on_the_scheduler_view_over_zmq(server):
    from gymnasium.utils.env_checker import check_env
    env = cosched.SchedulerEnv(scenario="knl-2", address=server, **SMALL)
    check_env(env, skip_render_check=True)
    env.close()


def test_list_describes_the_nodes_keys(server):
    import tiergym
    names = [k[0] for k in tiergym.config_keys(server, env="tiergym/CoschedNode-v0")]
    for key in ("tenants", "tenant_read_pct", "contention_max_passes", "sensitivity", "steps"):
        assert key in names
    assert "profiles" not in names
    assert "profiles" in [k[0] for k in tiergym.config_keys(server)]
    with pytest.raises(KeyError, match="does not serve"):
        tiergym.config_keys(server, env="nosuch")


def test_a_private_server_of_its_own_and_refusals_on_their_fields(server):
    # disagg: the private server serves the bundled profiles recorded there.
    there = cosched.parallel_env(scenario="disagg-2", address="private", **SMALL)
    here = cosched.parallel_env(scenario="disagg-2", **SMALL)
    same(episode(there, 1, np.random.default_rng(1)), episode(here, 1, np.random.default_rng(1)))
    there.close()
    with pytest.raises(ServerError) as e:
        cosched.parallel_env(scenario=None, address=server, tenants=["minife", "nosuch"],
                             **SMALL)
    assert e.value.field == "config.tenants"
    with pytest.raises(ServerError) as e:
        cosched.parallel_env(scenario="knl-2", address=server, interference="x.csv", **SMALL)
    assert e.value.field == "config.interference"
