"""CUDA kernels for the GPU phase: Fr NTT (``ntt.py``), G1 XYZZ arithmetic (``g1.py``) and the
Pippenger MSM (``msm.py``), written once over ``kernels.field`` and run as CUDA kernels, under the
numba CUDA simulator, or as CPU loops (``runtime.py``, ``launch.py``). See README.md here."""
