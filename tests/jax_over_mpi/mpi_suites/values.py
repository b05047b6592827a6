"""What the suites read from JAX's arrays: this process's part of a global
array, and the same arrays on this process's device alone, where a
computation is the single-process reference the suites compare with."""
import numpy as np


def local_device():
    import jax

    return jax.local_devices()[0]


def on_one_device(*arrays):
    """The same arrays, committed to this process's device: computations on
    them run here alone, without collectives (the single-process reference)."""
    import jax

    return [jax.device_put(a, local_device()) for a in arrays]


def local_value(array) -> np.ndarray:
    """This process's shard of a global array, as NumPy."""
    return np.asarray(array.addressable_data(0))


def replicated_value(array) -> np.ndarray:
    """A fully replicated global array's value, as NumPy (every process holds it all)."""
    return np.asarray(array.addressable_data(0))
