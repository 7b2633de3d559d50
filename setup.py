"""Builds the native MSM and QAP extensions with the system C compiler (``pip install -e .``)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "cuzk.prover._native._msm",
            sources=["cuzk/prover/_native/msm.c"],
            depends=[
                "cuzk/prover/_native/fp_tmpl.h",
                "cuzk/prover/_native/msm_arch.h",
                "cuzk/prover/_native/curve_tmpl.h",
                "cuzk/prover/_native/bucket_tmpl.h",
                "cuzk/prover/_native/fp_mulx_asm.h",
                "cuzk/prover/_native/arith.h",
                "cuzk/prover/_native/arith_adx.h",
            ],
            extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wno-unused-function"],
        ),
        Extension(
            "cuzk.prover._native._qap",
            sources=["cuzk/prover/_native/qap.c"],
            depends=["cuzk/prover/_native/arith.h", "cuzk/prover/_native/arith_adx.h",
                     "cuzk/prover/_native/fr_tmpl.h", "cuzk/prover/_native/fr_mulx_asm.h"],
            extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wno-unused-function"],
            extra_link_args=["-pthread"],
        ),
    ]
)
