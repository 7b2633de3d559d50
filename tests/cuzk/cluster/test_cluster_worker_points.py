"""A GPU phase's output crosses Ray (pickle) from a GPU worker to the head: its curve points as
compressed bytes, its other fields (the device steps' times) as they are."""

from __future__ import annotations

import pickle

from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk.cluster.worker import pack_points, unpack_points
from cuzk.prover.groth16 import GpuOutput


def test_gpu_output_with_b2_and_step_times_survives_pickle():
    g = G1Point()
    out = GpuOutput(a=g * Scalar(2), b1=g * Scalar(3), c=G1Point.identity(), h=g,
                    b2=G2Point() * Scalar(5), steps_ms={"H": 1.5, "MSM B2": 7.25})
    back = unpack_points(pickle.loads(pickle.dumps(pack_points(out))))
    assert back == out


def test_gpu_output_without_b2_or_steps_survives_pickle():
    g = G1Point()
    out = GpuOutput(a=g, b1=g, c=g, h=g)
    back = unpack_points(pickle.loads(pickle.dumps(pack_points(out))))
    assert back == out and back.b2 is None and back.steps_ms == {}


def test_anything_else_travels_as_it_is():
    assert pack_points({"device": "cpu"}) == {"device": "cpu"}
    assert unpack_points({"device": "cpu"}) == {"device": "cpu"}
