# cuzk proving engine image: `cuzk serve` on 0.0.0.0:9820, CUDA when a GPU is passed in
# (docker-compose.yml reserves one), the CPU backend otherwise.
#
#   docker build -t cuzk:0.1.0 .
#   docker run --gpus all -p 127.0.0.1:9820:9820 -v cuzk-data:/var/lib/cuzk cuzk:0.1.0
#
# The CUDA devel image carries NVRTC and libNVVM, which the GPU kernels compile against at run
# time; the NVIDIA driver (580 or newer, for CUDA 13.0) comes from the host through the NVIDIA
# container toolkit. The CPU-only override (deploy/docker-compose.cpu.yml) builds on plain
# Ubuntu without the GPU extra: BASE_IMAGE=ubuntu:24.04, CUZK_EXTRAS="".
ARG BASE_IMAGE=nvidia/cuda:13.0.1-devel-ubuntu24.04
FROM ${BASE_IMAGE}
ARG CUZK_EXTRAS=gpu

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/cuzk

ENV PATH=/opt/cuzk/bin:$PATH

WORKDIR /src
COPY pyproject.toml setup.py README.md constraints.txt ./
COPY cuzk ./cuzk
COPY kernels ./kernels
# The exact versions the tests passed with (constraints.txt); the extras, when any, in brackets:
# "gpu" (CUDA), plus "cluster" for Ray (deploy/docker-compose.cluster.yml: CUZK_EXTRAS=gpu,cluster).
RUN pip install -c constraints.txt ".${CUZK_EXTRAS:+[$CUZK_EXTRAS]}" && rm -rf /src

# The engine's state lives under its home, /var/lib/cuzk (one volume in compose): proving keys
# generated on first use in keys/, the job journal in state/. Both are created here, owned by
# the cuzk user, so that a fresh named volume mounted over /var/lib/cuzk (which Docker fills
# from the image, ownership included) is writable by the engine.
RUN useradd --system --create-home --home-dir /var/lib/cuzk --shell /usr/sbin/nologin cuzk \
    && install -d -o cuzk -g cuzk -m 0750 /var/lib/cuzk/keys /var/lib/cuzk/state
COPY --chmod=0755 deploy/docker/entrypoint.sh /usr/local/bin/cuzk-entrypoint
USER cuzk
WORKDIR /var/lib/cuzk

# Listening on every interface, the server refuses to start without a bearer token
# (CUZK_SERVER_AUTH_TOKEN or CUZK_SERVER_AUTH_TOKEN_FILE, e.g. a mounted secret) unless
# CUZK_SERVER_ALLOW_UNAUTHENTICATED=true says the network in front is trusted.
ENV HOME=/var/lib/cuzk \
    XDG_STATE_HOME=/var/lib/cuzk/state \
    CUZK_SERVER_LISTEN=0.0.0.0:9820 \
    CUZK_ENGINE_KEYS_DIR=/var/lib/cuzk/keys

VOLUME ["/var/lib/cuzk"]
EXPOSE 9820
# Ready, not merely alive: 503 while starting and while draining on SIGTERM.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD curl -fsS http://127.0.0.1:9820/readyz || exit 1

ENTRYPOINT ["/usr/local/bin/cuzk-entrypoint"]
CMD ["serve"]
