"""Lists of ranks as a person reads them at any scale: "ranks 1-16, 18-63" rather than sixty-three
numbers, or the first sixteen and "and 47 more" (issue 82: a stall report at 64 ranks)."""


def ranges(ranks) -> str:
    """"0-3, 5, 7-9" for [0, 1, 2, 3, 5, 7, 8, 9] (sorted, duplicates dropped)."""
    out, run = [], []
    for r in sorted(set(ranks)):
        if run and r == run[-1] + 1:
            run.append(r)
            continue
        if run:
            out.append(_run(run))
        run = [r]
    if run:
        out.append(_run(run))
    return ", ".join(out)


def _run(run) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}, {run[1]}" if len(run) == 2 else f"{run[0]}-{run[-1]}"


def ranks_text(ranks) -> str:
    """"rank 3", "ranks 1-63": the word and the ranges."""
    ranks = sorted(set(ranks))
    return f"rank{'s' if len(ranks) > 1 else ''} {ranges(ranks)}"


def span(values, unit: str = "s") -> str:
    """"5 s" or "5-7 s" for whole numbers of a unit."""
    low, high = min(values), max(values)
    return f"{low:.0f} {unit}" if f"{low:.0f}" == f"{high:.0f}" else f"{low:.0f}-{high:.0f} {unit}"
