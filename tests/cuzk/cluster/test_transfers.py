"""The rules by which cuzk.cluster.transfers counts an object's bytes as moved between nodes
(the figures from a real cluster are checked in tests/cluster/test_cluster_real_prover.py)."""

from __future__ import annotations

from cuzk.cluster.transfers import moved_bytes

HEAD, CPU, GPU = "head-node", "cpu-node", "gpu-node"


def test_a_stored_object_counts_each_copy_off_the_node_that_made_it():
    # a/b/c made on the CPU node and pulled by the GPU phase: one copy moved
    assert moved_bytes(1000, [CPU, GPU], CPU, HEAD, sent_to=[GPU], resent_to=[]) == 1000
    # made and used on the GPU node: nothing moved, whatever it was passed to
    assert moved_bytes(1000, [GPU], GPU, HEAD, sent_to=[GPU, GPU], resent_to=[]) == 0
    # fetched by the head (ray.get) too: two copies off its node
    assert moved_bytes(1000, [HEAD, CPU, GPU], GPU, HEAD, sent_to=[], resent_to=[]) == 2000


def test_an_inline_object_counts_each_hop_through_the_head_between_two_nodes():
    # the witness under 100 KiB: CPU node -> head (reply), head -> GPU node, head -> CPU node
    assert moved_bytes(10, [], CPU, HEAD, sent_to=[GPU, CPU], resent_to=[]) == 30
    # made on the head's node and passed to a step there: no hop leaves the node
    assert moved_bytes(10, [], HEAD, HEAD, sent_to=[HEAD], resent_to=[]) == 0


def test_a_value_the_head_sends_again_counts_once_per_other_node():
    assert moved_bytes(10, [], GPU, HEAD, sent_to=[], resent_to=[CPU]) == 20
    assert moved_bytes(10, [], GPU, HEAD, sent_to=[], resent_to=[HEAD]) == 10
