# JAX over MPI (the MPICH wheel), with mpi-collectives and its examples.
#   docker build -t mpi-collectives .
#   docker run --rm mpi-collectives                                   # a 2-rank example
#   docker run --rm mpi-collectives mpiexec -n 4 python examples/train_data_parallel.py
# The steps are in scripts/docker_steps.sh, which CI runs on the host (no Docker engine there).
FROM python:3.11-slim

COPY . /opt/mpi-collectives
RUN PIP_NO_CACHE_DIR=1 bash /opt/mpi-collectives/scripts/docker_steps.sh /opt/venv /opt/mpi-collectives \
    && useradd --create-home --uid 1000 --shell /bin/bash jax \
    && cp -r /opt/mpi-collectives/examples /home/jax/examples \
    && chown -R jax:jax /home/jax/examples

ENV PATH=/opt/venv/bin:$PATH \
    JAX_PLATFORMS=cpu
USER 1000
WORKDIR /home/jax
CMD ["mpiexec", "-n", "2", "python", "examples/mesh_2d.py"]
