"""``stage_times`` prices a microbatch's stages exactly as ``stage_ms`` does stage by stage."""

from __future__ import annotations

import random

import pytest

from ppsched.core.batch import BatchShape
from ppsched.core.models import BUILTIN_MODELS
from ppsched.sim.cost import build_cost_model


def random_shape(rng: random.Random) -> BatchShape:
    pieces = tuple((rng.randrange(0, 6000), rng.randrange(1, 2600))
                   for _ in range(rng.choice([0, 0, 1, 1, 2])))
    decodes = rng.choice([0, rng.randrange(1, 40), rng.randrange(40, 400)])
    if not pieces and not decodes:
        return BatchShape()
    return BatchShape(pieces, decodes, decodes * rng.randrange(1, 3000))


@pytest.mark.parametrize(("model", "pp", "tp"), [("qwen2.5-32b", 4, 1), ("qwen2.5-14b", 2, 2),
                                                 ("qwen2.5-14b", 3, 1)])
def test_stage_times_equal_stage_ms_per_stage_with_the_same_noise(model, pp, tp):
    def cost():
        return build_cost_model(BUILTIN_MODELS[model], "a100-40g-pcie", pp_size=pp,
                                tp_size=tp, seed=7)

    together, per_stage = cost(), cost()
    rng = random.Random(pp * 10 + tp)
    for _ in range(3000):  # crosses noise-block refills (4096 draws each)
        shape = random_shape(rng)
        got = together.stage_times(shape)
        want = [per_stage.stage_ms(stage, shape) for stage in range(pp)]
        assert [v.hex() for v in got] == [v.hex() for v in want], shape
