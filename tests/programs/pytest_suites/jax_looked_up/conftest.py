"""Issue 80 (the fourth read's B1): an availability check before the suite's first `import jax`, as
many suites and libraries make. It asks the import system's finders without importing; the plugin's
late JAX start must still run at the real import that follows."""
import importlib.util

HAS_JAX = importlib.util.find_spec("jax") is not None
