"""tiergym with TorchRL (`pip install "tiergym[torchrl]"`: torchrl 0.14 and tensordict, on
torch 2.13). Importing this module imports torch and torchrl; `import tiergym` does not.

TorchRL's own wrappers take tiergym's environments as they are, and pass check_env_specs:

    from torchrl.envs import GymEnv, GymWrapper
    env = GymEnv("tiergym/TierPlacement")                   # the default task, one environment
    env = GymWrapper(tiergym.make("tiergym/TierPlacement-v1", num_regions=8))
    env = GymWrapper(tiergym.InProcessVectorEnv(8, autoreset_mode="disabled", copy=True,
                                                **tiergym.DEFAULT_TASK))   # batch_size [8]

A vector environment needs autoreset_mode "disabled" (or "same_step"; TorchRL refuses
"next_step" and prefers "disabled": it resets the ended sub-environments itself, through
reset(options={"reset_mask": ...})) and, in process, copy=True: TorchRL keeps the arrays
step() returns, and the in-process environment's own arrays are overwritten by the next
step (copy=False would give a rollout whose every step holds the last one's data).

make_env() does all that and brings the action mask along:

    from tiergym.torchrl import make_env, MaskedMultiCategorical
    env = make_env()                            # "tiergym/TierPlacement-v1", one environment
    env = make_env(num_envs=8, threads=2)       # the in-process vector environment, batched
    td = env.reset()
    td["action_mask"]                           # bool [*batch, regions, choices]

Action masks. tiergym's action is a MultiDiscrete with the same number of choices per
region (placement mode: tiers; keep mode: 1 + tiers), which TorchRL turns into a stack of
Categorical specs of shape [regions], and its mask is one row per region ([regions,
choices]): exactly the mask that stack takes. So TorchRL's ActionMask transform works
here, once the mask reaches the tensordict as bool (the environment's info holds it as
int8, which ActionMask refuses). The failure of pytorch/rl #3242 (a MultiDiscrete whose
mask is over the joint action, of another shape than the stack's) does not arise.
with_action_mask(env) adds the reader and the transform to any TorchRL wrapper of a
tiergym environment: "action_mask" is in every tensordict, ActionMask keeps the spec's
mask up to date (env.rand_step and RandomPolicy draw only allowed actions), and a policy
reads it with MaskedMultiCategorical (one masked Categorical per region, their
log-probabilities summed: one action, one log-probability, as PPO's ratio wants):

    actor = ProbabilisticActor(TensorDictModule(net, ["observation"], ["logits"]),
                               in_keys={"logits": "logits", "mask": "action_mask"},
                               distribution_class=MaskedMultiCategorical,
                               spec=env.action_spec, return_log_prob=True)

In move mode (Discrete, one region per step) the mask is one row; use TorchRL's
MaskedCategorical there (distribution_class(env) picks the right one).
agents_examples/torchrl_ppo.py is PPO on the default task with these pieces (a collector,
GAE, ClipPPOLoss, an optimizer).
"""

import gymnasium
import numpy as np
import torch
from tensordict import TensorDictBase
from torch import distributions as D
from torchrl.data import Binary, Categorical, Composite, OneHot
from torchrl.envs import GymWrapper, TransformedEnv
from torchrl.envs.gym_like import BaseInfoDictReader
from torchrl.envs.transforms import ActionMask
from torchrl.modules import MaskedCategorical

from ._vector_base import DISABLED
from .factory import make_vec
from .tasks import DEFAULT_TASK_ID

__all__ = ["make_env", "with_action_mask", "ActionMaskReader", "MaskedMultiCategorical",
           "distribution_class", "MASK_KEY"]

MASK_KEY = "action_mask"


def _tiergym_env(env):
    """The tiergym environment under a TorchRL wrapper (and Gymnasium's wrappers)."""
    inner = getattr(env, "base_env", env)
    inner = getattr(inner, "_env", inner)
    inner = getattr(inner, "unwrapped", inner)
    if not hasattr(inner, "action_masks") or not hasattr(inner, "tier_spec"):
        raise TypeError(f"not a TorchRL wrapper of a tiergym environment: {type(env).__name__} "
                        f"around {type(inner).__name__}")
    return inner


class ActionMaskReader(BaseInfoDictReader):
    """Writes the action mask of the current state into the tensordict under "action_mask",
    bool [*batch, regions, choices] (move mode: [*batch, moves]). It reads the mask from
    the environment's action_masks(), which a vector environment keeps for every
    sub-environment, also those a partial reset left alone (their rows of a reset's info
    are empty)."""

    def __init__(self, source, batch_size=()):
        self.source = source
        space = _single_action_space(source)
        if isinstance(space, gymnasium.spaces.Discrete):
            self.mask_shape = (int(space.n),)
        else:
            self.mask_shape = (int(source.num_regions), int(np.asarray(space.nvec).flat[0]))
        self.batch_size = torch.Size(batch_size)
        shape = (*self.batch_size, *self.mask_shape)
        self._info_spec = Composite(
            {MASK_KEY: Binary(n=self.mask_shape[-1], shape=shape, dtype=torch.bool)},
            shape=self.batch_size)

    def __call__(self, info_dict, tensordict: TensorDictBase) -> TensorDictBase:
        masks = np.asarray(self.source.action_masks())
        tensordict.set(MASK_KEY, torch.from_numpy(
            masks.reshape(*self.batch_size, *self.mask_shape).astype(bool)))
        return tensordict

    @property
    def info_spec(self):
        return self._info_spec


def _single_action_space(source):
    return getattr(source, "single_action_space", source.action_space)


def with_action_mask(env):
    """`env` (a TorchRL GymWrapper / GymEnv of a tiergym environment, single or vector)
    with "action_mask" in its tensordicts and TorchRL's ActionMask transform after it.
    Returns a TransformedEnv."""
    base = getattr(env, "base_env", env)
    source = _tiergym_env(base)
    base.set_info_dict_reader(ActionMaskReader(source, base.batch_size))
    return TransformedEnv(env, ActionMask(action_key="action", mask_key=MASK_KEY))


def make_env(env_id=DEFAULT_TASK_ID, num_envs=None, *, inprocess=True, threads=1, mask=True,
             categorical_action_encoding=True, device=None, **kwargs):
    """A TorchRL environment of a tiergym task.

    num_envs=None: one environment (a TierEnv: a private server, or `address=`), batch
    size []. num_envs=N: a vector environment of N, batch size [N]: in this process
    (tiergym.InProcessVectorEnv, stepped on `threads` threads) or, with inprocess=False,
    tiergym.VectorEnv on a server; autoreset "disabled" (TorchRL resets the ended ones).
    `kwargs` are configuration keys over the task's (tiergym.tasks) and
    the environments' keyword arguments (address, timeout, ...), as tiergym.make_vec takes
    them. mask: add the action
    mask and the ActionMask transform (with_action_mask). categorical_action_encoding:
    integer actions (True) or one-hot (False), as GymWrapper's argument."""
    options = dict(categorical_action_encoding=categorical_action_encoding)
    if device is not None:
        options["device"] = device
    if num_envs is None:
        gym_env = gymnasium.make(env_id, disable_env_checker=True, **kwargs)
        env = GymWrapper(gym_env, **options)
    else:
        config = dict(kwargs)
        if inprocess:
            config.update(copy=True, threads=threads)
        elif threads != 1:
            raise ValueError("threads: the in-process vector environment's; a server has "
                             "its own (server_args=['--threads', 'N'])")
        vector = make_vec(env_id, int(num_envs), inprocess=inprocess, autoreset_mode=DISABLED,
                          **config)
        try:
            env = GymWrapper(vector, **options)
            _stacked_action_spec(env, vector, categorical_action_encoding)
        except BaseException:
            vector.close()
            raise
    return with_action_mask(env) if mask else env


def _stacked_action_spec(env, vector, categorical):
    """A vector environment's action spec as the single one's, stacked over the batch.
    Gymnasium's batch_space makes a Box of integers of a batch of MultiDiscrete actions
    (TorchRL reads it as BoundedDiscrete, which ActionMask refuses); the actions are the
    same integers."""
    space = vector.single_action_space
    if isinstance(space, gymnasium.spaces.Discrete):
        return  # batch_space gives a MultiDiscrete, which TorchRL stacks already
    choices = int(np.asarray(space.nvec).flat[0])
    shape = (*env.batch_size, *space.shape)
    if categorical:
        spec = Categorical(choices, shape=shape, dtype=torch.int64, device=env.device)
    else:
        spec = OneHot(choices, shape=(*shape, choices), dtype=torch.int64, device=env.device)
    env.action_spec = spec


class MaskedMultiCategorical(D.Independent):
    """One masked categorical per region, independent, as one distribution over the whole
    action: logits and mask [*batch, regions, choices]; a sample is [*batch, regions] of
    choice indices, never one the mask forbids; log_prob and entropy sum over the regions
    (shape [*batch]). For ProbabilisticActor: in_keys {"logits": ..., "mask":
    "action_mask"}."""

    def __init__(self, logits, mask, validate_args=None):
        # Categorical's log_prob (not cross_entropy's): it broadcasts a sample of more
        # dimensions ([n, *batch, regions]) against the batch, as torch's distributions do.
        super().__init__(MaskedCategorical(logits=logits, mask=mask.bool(),
                                           use_cross_entropy=False), 1,
                         validate_args=validate_args)

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def deterministic_sample(self):
        return self.base_dist.mode


def distribution_class(env):
    """The distribution class for a policy of `env`: MaskedMultiCategorical for a
    MultiDiscrete action (placement and keep modes), TorchRL's MaskedCategorical for a
    Discrete one (move mode)."""
    space = _single_action_space(_tiergym_env(env))
    return (MaskedCategorical if isinstance(space, gymnasium.spaces.Discrete)
            else MaskedMultiCategorical)
