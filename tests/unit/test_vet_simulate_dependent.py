"""The whole vetting path on dependent samples (hpcval.vet.simvetting): a node's
samples within a step share a random offset, and on a busy machine some
nodes' whole step falls together (as 3 of 16 did on the lab,
tests/data/vet/shm-dips-16nodes.json). With the confirmation (suspects
measured again beside healthy controls, a fresh offset) no healthy node is
named and the injected faults are; whole-step dips fool the first measurement
alone, and the confirmation removes at least three quarters of those names (all of
them with the repeated measurements: tests/unit/test_vet_confirm_again.py)."""

from __future__ import annotations

import numpy as np

from hpcval.vet.simvetting import NodeModel, vetting

#: the lab's share of nodes whose whole per-node step fell (3 of 16)
LAB_DIPS = NodeModel(node_dip_rate=3 / 16)


def test_with_confirmation_no_healthy_node_named_and_the_slow_node_and_link_are() -> None:
    # node offsets as the lab's (log-sd 0.16 for shared-memory PingPong), no whole-step dips
    rng = np.random.default_rng(41)
    suspects = 0
    for _ in range(4):
        out = vetting(64, rng, slow_nodes=1, slow_links=1)
        suspects += out.suspects
        assert out.healthy_named("confirmed") == 0
        assert out.healthy_links("confirmed") == 0
        assert out.named["confirmed"] == set(out.slow_nodes)
        assert out.faults_named("confirmed") == 2
    assert suspects > 0  # the confirmation step ran


def test_whole_step_dips_fool_the_first_measurement_and_confirmation_removes_most() -> None:
    # the lab's rate of whole-step dips (3 of 16 nodes): the suspects are measured
    # again as often as confirm.needed says (at most a quarter of the names remain)
    rng = np.random.default_rng(41)
    first = confirmed = 0
    for _ in range(4):
        out = vetting(64, rng, slow_nodes=1, slow_links=1, model=LAB_DIPS)
        first += out.healthy_named("first")
        confirmed += out.healthy_named("confirmed")
        assert out.named["confirmed"] >= set(out.slow_nodes)
    assert first >= 20
    assert confirmed * 4 <= first
