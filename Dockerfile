# syntax=docker/dockerfile:1
#
# dmlserve images. Two targets:
#   docker build --target gpu -t dmlserve:gpu .   # CuPy + CUDA 13 wheels (needs the NVIDIA runtime)
#   docker build --target cpu -t dmlserve:cpu .   # slim Python + NumPy
# Every Python package comes from a hashed lock in deploy/ (regenerate with
# deploy/update-locks.sh); base images are pinned by tag. PYTHON_IMAGE may be any Debian-family
# image whose `python3` (3.11 or 3.12; the locks resolve the same for both) has its venv
# module: deploy/smoke-image.sh builds the cpu target on a local Debian bookworm base that way
# where the registry cannot be reached.

ARG PYTHON_IMAGE=python:3.12.12-slim-bookworm
ARG GPU_BASE_IMAGE=ubuntu:24.04

# ---------------------------------------------------------------------------
# wheel: build the dmlserve wheel once, for both targets (pure Python + .cu sources). The
# build tools go in a venv of their own: a distribution's python3 refuses system-wide
# installs (PEP 668), and nothing of this stage reaches the images but the wheel.
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY deploy/requirements-build.txt deploy/requirements-build.txt
RUN python3 -m venv /opt/build \
    && /opt/build/bin/python -m pip install --no-cache-dir --require-hashes \
        -r deploy/requirements-build.txt
COPY pyproject.toml README.md ./
COPY kernels kernels
COPY service service
COPY clients clients
COPY src src
RUN /opt/build/bin/python -m pip wheel --no-cache-dir --no-deps --no-build-isolation -w /wheels .

# ---------------------------------------------------------------------------
# cpu-venv: the NumPy backend's virtual environment.
FROM ${PYTHON_IMAGE} AS cpu-venv
COPY deploy/requirements-build.txt deploy/requirements-lock.txt /tmp/req/
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install --no-cache-dir --require-hashes \
        -r /tmp/req/requirements-build.txt \
    && /opt/venv/bin/python -m pip install --no-cache-dir --require-hashes \
        -r /tmp/req/requirements-lock.txt
COPY --from=wheel /wheels /wheels
RUN /opt/venv/bin/python -m pip install --no-cache-dir --no-deps /wheels/*.whl

# ---------------------------------------------------------------------------
# gpu-python: Ubuntu's Python 3.12, no CUDA toolkit. CUDA comes as the `gpu` extra's wheels in
# the lock: NVRTC and the runtime headers it compiles the kernels with (<cuda_fp16.h>), which
# CuPy finds in site-packages; the NVIDIA Container Toolkit mounts the host driver (libcuda).
# Python is pinned to the upstream release; the Ubuntu revision is left open so security
# updates still apply and the build does not break when the archive drops an old revision.
FROM ${GPU_BASE_IMAGE} AS gpu-python
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3.12=3.12.3-1ubuntu0.* \
    && rm -rf /var/lib/apt/lists/*

# gpu-venv: the CuPy backend's virtual environment (venv support is needed only to build it).
FROM gpu-python AS gpu-venv
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3.12-venv=3.12.3-1ubuntu0.* \
    && rm -rf /var/lib/apt/lists/*
COPY deploy/requirements-build.txt deploy/requirements-gpu-lock.txt /tmp/req/
RUN python3.12 -m venv /opt/venv \
    && /opt/venv/bin/python -m pip install --no-cache-dir --require-hashes \
        -r /tmp/req/requirements-build.txt \
    && /opt/venv/bin/python -m pip install --no-cache-dir --require-hashes \
        -r /tmp/req/requirements-gpu-lock.txt
COPY --from=wheel /wheels /wheels
RUN /opt/venv/bin/python -m pip install --no-cache-dir --no-deps /wheels/*.whl

# ---------------------------------------------------------------------------
# gpu: one pod/container per GPU; CuPy compiles kernels with NVRTC into CUPY_CACHE_DIR.
FROM gpu-python AS gpu
LABEL org.opencontainers.image.title="dmlserve" \
      org.opencontainers.image.description="DirectML operators over HTTP (CuPy on NVIDIA GPUs)" \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 dmlserve \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin dmlserve \
    && mkdir -p /var/cache/dmlserve/cupy \
    && chown -R 10001:10001 /var/cache/dmlserve
COPY --from=gpu-venv /opt/venv /opt/venv
# The NVIDIA Container Toolkit reads these (as on NVIDIA's CUDA images): expose the GPUs'
# compute and nvidia-smi, and refuse to start on a driver older than CUDA 13 (R580).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=13.0" \
    DMLSERVE_BACKEND=cupy \
    DMLSERVE_HOST=0.0.0.0 \
    DMLSERVE_PORT=8000 \
    DMLSERVE_CUPY_CACHE_DIR=/var/cache/dmlserve/cupy \
    CUPY_CACHE_DIR=/var/cache/dmlserve/cupy
USER 10001:10001
WORKDIR /var/cache/dmlserve
EXPOSE 8000 8001
# Kernel compilation and warm-up run before readiness; give them time before failures count.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/v2/health/ready' % os.environ.get('DMLSERVE_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["dmlserve", "serve"]

# ---------------------------------------------------------------------------
# cpu: the NumPy backend on a slim Python base.
FROM ${PYTHON_IMAGE} AS cpu
LABEL org.opencontainers.image.title="dmlserve" \
      org.opencontainers.image.description="DirectML operators over HTTP (NumPy on CPU)" \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 dmlserve \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin dmlserve
COPY --from=cpu-venv /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DMLSERVE_BACKEND=numpy \
    DMLSERVE_HOST=0.0.0.0 \
    DMLSERVE_PORT=8000
USER 10001:10001
WORKDIR /tmp
EXPOSE 8000 8001
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/v2/health/ready' % os.environ.get('DMLSERVE_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["dmlserve", "serve"]
