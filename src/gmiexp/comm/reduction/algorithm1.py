"""The paper's Algorithm 1 (communication strategy selection) and the layout limits of each strategy."""

from __future__ import annotations

from collections.abc import Sequence


def select(mpl: Sequence[Sequence[int]]) -> tuple[str, str]:
    """Algorithm 1 over the GMI-to-GPU mapping list ``mpl``; returns (strategy, reason).

    ``mpl[d]`` lists the trainer GMI ids on GPU ``d``, e.g. ``[[0, 1, 2], [3, 4, 5]]``.
    """
    g = len(mpl)
    if g <= 1:  # lines 2-4
        n = len(mpl[0]) if mpl else 0
        return "mpr", f"auto (Algorithm 1): all {n} trainer GMIs on one GPU -> MPR"
    per_gpu = {len(li) for li in mpl}  # lines 5-7
    if len(per_gpu) > 1:  # lines 8-10
        counts = [len(li) for li in mpl]
        return "har", f"auto (Algorithm 1): uneven GMIs per GPU {counts} on {g} GPUs -> HAR"
    t = per_gpu.pop()
    if t > g:  # lines 11-13
        return "har", f"auto (Algorithm 1): {t} GMIs per GPU > {g} GPUs, so MRR cannot serve it -> HAR"
    return "mrr", f"auto (Algorithm 1): {t} GMIs per GPU <= {g} GPUs -> MRR"  # line 14


def mrr_limit(mpl: Sequence[Sequence[int]]) -> str | None:
    """Why MRR cannot serve ``mpl`` (None when it can): it needs even GMIs per GPU and at most g of them."""
    g = len(mpl)
    counts = [len(li) for li in mpl]
    if len(set(counts)) > 1:
        return f"MRR needs the same number of GMIs on every GPU; this layout has {counts} on {g} GPUs"
    t = counts[0] if counts else 0
    if t > g:
        return (
            f"MRR needs GMIs per GPU <= GPUs (the ring of ring representatives must sit on distinct GPUs); "
            f"this layout has {t} GMIs per GPU on {g} GPU{'s' if g != 1 else ''}"
        )
    return None
