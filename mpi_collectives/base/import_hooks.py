"""after_import(name, callback): run a callback right after a module has been imported.

JAX reads some of its settings when it is imported, and the package must act
at that moment without importing jax itself: importing the package must not
import jax (jaxlib reads MPITRAMPOLINE_LIB when it is loaded), and a suite that
never uses JAX must not pay for its start (the pytest plugin: docs/testing.md).

The hook stays armed until the module's own code has run, not until the
first look-up: `importlib.util.find_spec("jax")` (an availability check many
suites and libraries make, `HAS_JAX = find_spec("jax") is not None`) asks the
finders too, without importing; a hook that went at the first look-up missed
the real import that followed, and the pytest plugin's JAX never started over
MPI (each rank its own one-process job: a wrong number, silent; issue 80).
Each look-up gets a spec of its own whose loader runs the callback; only the
spec the import system executes fires it, once.
"""
import importlib.abc
import sys
import threading


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for `name`, takes the spec the finders after it give and runs `callback`
    with the module once the module's own code has run; then it leaves sys.meta_path."""

    def __init__(self, name, callback, key):
        self.name, self.callback, self.key = name, callback, key
        self.fired = False
        self._lock = threading.Lock()

    def find_spec(self, name, path, target=None):
        if name != self.name or self.fired:
            return None
        spec = None
        for finder in list(sys.meta_path):  # the finders after this one, as the import system asks them
            if finder is self or isinstance(finder, _AfterImport) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run, hook = spec.loader.exec_module, self

        def exec_module(module):
            run(module)
            hook._fire(module)

        spec.loader.exec_module = exec_module  # this spec's own loader object (a new one each look-up)
        return spec

    def _fire(self, module):
        with self._lock:
            if self.fired:
                return
            self.fired = True
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        self.callback(module)


def after_import(name: str, callback, key: str) -> None:
    """callback(module) once `name` is imported: now, where it is already; else right after its
    import, in the thread that imports it. `key`: one hook of that key at a time."""
    if name in sys.modules:
        callback(sys.modules[name])
        return
    if any(isinstance(f, _AfterImport) and f.key == key for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _AfterImport(name, callback, key))


def armed(key: str) -> bool:
    """Is a hook of that key still waiting for its module's import?"""
    return any(isinstance(f, _AfterImport) and f.key == key for f in sys.meta_path)
