"""False alarms and misses of the output-cost guards (hpcval.node.physics), simulated.

A job runs ``strategy`` and ``none`` in 5 pairs; the cost of a pair is the
run with output minus the run without. Run times are drawn from a normal and
from a Student-t with 3 degrees of freedom (heavy tails, as a loaded machine
gives); the noise band is the largest difference of two consecutive runs
without output. Printed: how often a free output (true cost 0) is called
impossible by ``output_cost_below_noise`` (every pair below 0 and the median
below -3 bands), and how often a broken measurement (true cost -10 standard
deviations) is caught; and how often a free output lies inside the noise.

    .venv/bin/python bench/output_cost_noise_sim.py
"""

import numpy as np

from hpcval.node.physics import BELOW_NOISE_BANDS

rng = np.random.default_rng(7)
N = 200_000
for dist in ("normal", "t3"):
    def draw(shape: tuple[int, int], dist: str = dist) -> np.ndarray:
        return rng.normal(size=shape) if dist == "normal" else rng.standard_t(3, size=shape)

    b, w = draw((N, 5)), draw((N, 5))
    band = np.abs(np.diff(b, axis=1)).max(axis=1)
    for shift in (0, 10):
        d = w - shift - b
        c = np.median(d, axis=1)
        caught = ((c < -BELOW_NOISE_BANDS * band) & (d.max(axis=1) < 0)).mean()
        print(f"{dist}: true cost {-shift:3d} sd: called impossible in {100 * caught:.3f} % "
              f"of {N} jobs")
    inside = (np.abs(np.median(w - b, axis=1)) <= band).mean()
    print(f"{dist}: a free output inside the noise in {100 * inside:.1f} % of jobs")
