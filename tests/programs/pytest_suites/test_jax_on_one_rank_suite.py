"""Issue 72's late JAX start, its limit: rank 1 fails before the test's `import jax`, so rank 0 alone
imports jax and waits in JAX's start (collective, as initialize() is). Not a hang: the job ends with
the line naming the test and the rank that left, after the hold a stuck wait gets."""


def test_a_jax_on_rank_0_alone(mpi_rank):
    assert mpi_rank != 1, "rank 1 fails before its import of jax"
    import jax

    assert jax.process_count() == 2


def test_b_never_reached():
    pass
