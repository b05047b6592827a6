"""float16 and float8 collectives over MPI, which XLA refuses before MPI is called.

XLA's MPI collectives refuse an all-reduce, all-gather or reduce-scatter of
float16 ("Unsupported primitive type for reduction: f16"), and its CPU
backend widens float8 to float16 first, so those fail too; over gloo they
work. install() registers CPU lowering rules for JAX's collective primitives
that, only while JAX's collectives go over MPI in a multi-process run
(decided when a program is lowered), rewrite them around the refusal:

- reductions (psum, pmax, pmin, psum_scatter): convert to float32, reduce,
  convert back (max and min are exact; sums are rounded once, at the end);
- psum over at most SUM_BY_GATHERING_UP_TO processes: gather the values as
  integers of their width, then every process sums the parts in float32, in
  the same order, and rounds once: the same rounding as above, in fewer bytes
  than a float32 all-reduce (P-1 x 2 bytes per element against 2(P-1)/P x 4),
  so a float16 psum costs no more than a float32 one of as many elements;
- gathers (all_gather): bitcast to the unsigned integer of the same width,
  gather, bitcast back (bit-exact, no arithmetic).

Everywhere else (gloo, one process, other dtypes, other platforms) the rule
is JAX's own, fetched before it is replaced. Primitives are found by the
names JAX has used for them (jax 0.4.27 to 0.10.2); a name this JAX lacks is
skipped with one log line.
"""
import numpy as np

from ..base.log import log

__all__ = ["install", "installed", "narrow_float"]

WIDEN = "widen"     # reduce in float32
BITS = "bits"       # move as unsigned integers of the same width

# name of the primitive -> treatment. Several names exist only in some versions:
# psum2 (shard_map's psum, jax 0.4.x), psum_invariant and all_gather_invariant (newer).
PRIMITIVES = {
    "psum": WIDEN,
    "pmax": WIDEN,
    "pmin": WIDEN,
    "reduce_scatter": WIDEN,
    "psum2": WIDEN,
    "psum_invariant": WIDEN,
    "all_gather": BITS,
    "all_gather_invariant": BITS,
}
SUMS = ("psum", "psum2", "psum_invariant")
SUM_BY_GATHERING_UP_TO = 4  # processes; beyond, the gathered bytes outgrow a float32 all-reduce's

# Which of them must exist for the common collectives to work; a missing one is logged at level 0.
REQUIRED = ("psum", "pmax", "pmin", "reduce_scatter", "all_gather")

_installed: dict = {}   # name -> the original rule, once install() replaced it


# Narrow floats XLA handles over MPI itself (it widens them to float32): left alone.
XLA_HANDLES = ("bfloat16", "float8_e8m0fnu")


def narrow_float(dtype) -> bool:
    """float16 and the float8/float4 types XLA's CPU backend widens to float16."""
    dtype = np.dtype(dtype)
    if dtype.itemsize > 2 or dtype.name in XLA_HANDLES:
        return False
    return dtype == np.float16 or dtype.name.startswith(("float8", "float4"))


def _bits(dtype) -> int:
    import ml_dtypes
    return int(ml_dtypes.finfo(dtype).bits)


def _active() -> bool:
    """JAX's collectives go over MPI and there is more than one process."""
    import jax

    from .jax_compat import collectives_implementation
    return collectives_implementation() == "mpi" and jax.process_count() > 1


def _tables():
    """JAX's lowering rules: the default ones and the per-platform ones (private, and stable
    across the supported versions)."""
    from jax._src.interpreters import mlir
    return mlir._lowerings, mlir._platform_specific_lowerings


def _original_rule(prim):
    default, per_platform = _tables()
    entry = per_platform.get("cpu", {}).get(prim) or default.get(prim)
    if entry is None:
        return None
    return getattr(entry, "rule", entry)  # a LoweringRuleEntry (newer) or the rule itself


def _find_primitives() -> dict:
    """name -> primitive, among those that have a lowering rule in this JAX."""
    import jax  # noqa: F401  (registers the collectives' rules)
    for module in ("jax._src.lax.parallel", "jax.experimental.shard_map", "jax._src.shard_map"):
        try:
            __import__(module)
        except Exception:  # not in this version
            pass
    default, per_platform = _tables()
    found = {}
    for prim in list(default) + list(per_platform.get("cpu", {})):
        name = getattr(prim, "name", None)
        if name in PRIMITIVES and name not in found:
            found[name] = prim
    return found


def _ir():
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo
    return ir, hlo


def _treatment(dtype, treatment):
    """Sub-byte floats (float4) have no unsigned integer of their width to travel as: they are
    widened instead, which is exact for them both ways."""
    return WIDEN if treatment == BITS and _bits(dtype) < 8 else treatment


def _stand_in(dtype, treatment):
    """The dtype a narrow float travels as."""
    if treatment == WIDEN:
        return np.dtype(np.float32)
    return np.dtype({8: np.uint8, 16: np.uint16}[_bits(dtype)])


def _ir_element_type(dtype):
    ir, _ = _ir()
    if dtype == np.float32:
        return ir.F32Type.get()
    return ir.IntegerType.get_unsigned(dtype.itemsize * 8)


def _recast(value, element_type, treatment):
    """value with element_type: converted (WIDEN) or bitcast (BITS)."""
    ir, hlo = _ir()
    shape = ir.RankedTensorType(value.type).shape
    new_type = ir.RankedTensorType.get(shape, element_type)
    op = hlo.ConvertOp if treatment == WIDEN else hlo.BitcastConvertOp
    return op(new_type, value).result


def _sum_by_gathering(ctx, args, params):
    """The lowered psum of narrow floats (every operand one) as described in the module's text,
    or None where that does not apply (groups of axis indices, positional axes, float4)."""
    axes = params.get("axes")
    if (params.get("axis_index_groups") is not None or not axes or any(isinstance(a, int) for a in axes)
            or not all(narrow_float(a.dtype) and _bits(a.dtype) >= 8 for a in ctx.avals_in)):
        return None
    import jax.numpy as jnp
    from jax import lax
    from jax.interpreters import mlir

    def body(*xs):
        processes = lax.psum(1, axes)  # a constant, known when tracing
        outs = []
        for x in xs:
            if processes == 1:
                outs.append(x)
            elif processes > SUM_BY_GATHERING_UP_TO:
                outs.append(lax.psum(x.astype(jnp.float32), axes).astype(x.dtype))
            else:
                bits = lax.bitcast_convert_type(x, _stand_in(x.dtype, BITS))
                parts = lax.bitcast_convert_type(lax.all_gather(bits, axes), x.dtype).astype(jnp.float32)
                total = parts[0]
                for i in range(1, processes):  # in rank order, on every process alike
                    total = total + parts[i]
                outs.append(total.astype(x.dtype))
        return outs

    return mlir.lower_fun(body, multiple_results=True)(ctx, *args)


def _make_rule(name, original, treatment):
    def rule(ctx, *args, **params):
        avals_in, avals_out = list(ctx.avals_in), list(ctx.avals_out)
        if (not any(narrow_float(a.dtype) for a in avals_in if hasattr(a, "dtype"))
                or len(avals_in) != len(args) or len(avals_out) != len(avals_in) or not _active()):
            return original(ctx, *args, **params)
        if name in SUMS:
            try:
                gathered = _sum_by_gathering(ctx, args, params)
            except Exception as e:  # a JAX whose tracing rules differ: the widened all-reduce below
                log(f"float16 psum by gathering not used: {type(e).__name__}: {e}", level=1)
                gathered = None
            if gathered is not None:
                return gathered
        new_in, new_out, new_args = [], [], []
        for aval_in, aval_out, arg in zip(avals_in, avals_out, args):
            if narrow_float(aval_in.dtype):
                how = _treatment(aval_in.dtype, treatment)
                stand_in = _stand_in(aval_in.dtype, how)
                arg = _recast(arg, _ir_element_type(stand_in), how)
                aval_in, aval_out = aval_in.update(dtype=stand_in), aval_out.update(dtype=stand_in)
            new_in.append(aval_in)
            new_out.append(aval_out)
            new_args.append(arg)
        outs = original(ctx.replace(avals_in=new_in, avals_out=new_out), *new_args, **params)
        results = []
        for aval_in, out, arg in zip(avals_in, outs, args):
            if narrow_float(aval_in.dtype):
                out = _recast(out, ir_element(arg), _treatment(aval_in.dtype, treatment))
            results.append(out)
        return results

    def ir_element(arg):
        ir, _ = _ir()
        return ir.RankedTensorType(arg.type).element_type

    rule.__name__ = f"narrow_dtypes_{name}_lowering"
    rule.mpi_collectives_original = original
    return rule


def install() -> list:
    """Register the rules (once; a second call does nothing). Returns the names installed.
    Never raises: what cannot be done here is logged in one line and left as JAX has it."""
    if _installed:
        return sorted(_installed)
    try:
        from jax.interpreters import mlir
        found = _find_primitives()
        for name, treatment in PRIMITIVES.items():
            prim = found.get(name)
            original = _original_rule(prim) if prim is not None else None
            if original is None:
                if name in REQUIRED:
                    log(f"float16/float8 {name} over MPI not enabled: this jax has no primitive "
                        f"'{name}' with a lowering rule", level=0)
                continue
            if hasattr(original, "mpi_collectives_original"):
                continue
            mlir.register_lowering(prim, _make_rule(name, original, treatment), platform="cpu")
            _installed[name] = original
    except Exception as e:  # a jax whose internals moved: keep JAX's behaviour, say so once
        log(f"float16/float8 collectives over MPI not enabled: {type(e).__name__}: {e}", level=0)
    return sorted(_installed)


def installed() -> list:
    """Names of the primitives whose CPU lowering install() replaced."""
    return sorted(_installed)
