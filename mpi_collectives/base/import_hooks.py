"""after_import(name, callback): run a callback right after a module has been imported.

JAX reads some of its settings when it is imported, and the package must act
at that moment without importing jax itself: importing the package must not
import jax (jaxlib reads MPITRAMPOLINE_LIB when it is loaded), and a suite that
never uses JAX must not pay for its start (the pytest plugin: docs/testing.md).
"""
import importlib.abc
import importlib.util
import sys


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for `name`, takes the spec the other finders give and runs `callback`
    with the module once the module's own code has run."""

    def __init__(self, name, callback, key):
        self.name, self.callback, self.key = name, callback, key

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # once; and the lookup below must not find this finder again
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run, callback = spec.loader.exec_module, self.callback

        def exec_module(module):
            run(module)
            callback(module)

        spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, callback, key: str) -> None:
    """callback(module) once `name` is imported: now, where it is already; else right after its
    import, in the thread that imports it. `key`: one hook of that key at a time."""
    if name in sys.modules:
        callback(sys.modules[name])
        return
    if any(isinstance(f, _AfterImport) and f.key == key for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _AfterImport(name, callback, key))
