"""The paper's Algorithm 1 (communication strategy selection) and the layout limits of each strategy.

The paper writes Algorithm 1 for one node. Across nodes (:func:`select_nodes`) gmiexp keeps its first
lines (MPR only when every trainer shares one GPU, which then is one GPU of one node; HAR for uneven
layouts and for ``t > G``) over the global map of all ``G`` GPUs of all nodes, and replaces its last
line, "MRR whenever it can serve", by Table 2 with the inter-node term: MRR sends one gradient per
ring through every node's network port and HAR one per node, so which one wins depends on the network
bandwidth, not on the layout alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


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


def select_nodes(nodes: Sequence[Sequence[Sequence[int]]],
                 estimate: Mapping[str, float | None]) -> tuple[str, str]:
    """Algorithm 1 over the per-node map ``nodes[n][d]``; ``estimate`` is Table 2 (any unit) across nodes.

    One node is the paper's Algorithm 1 unchanged. ``estimate`` is only read when both MRR and HAR can serve.
    """
    if len(nodes) <= 1:
        return select(nodes[0] if nodes else [])
    mpl = [li for node in nodes for li in node]
    g, n = len(mpl), len(nodes)
    counts = [len(li) for li in mpl]
    if len(set(counts)) > 1:
        return "har", f"auto (Algorithm 1 across {n} nodes): uneven GMIs per GPU {counts} on {g} GPUs -> HAR"
    t = counts[0]
    if t > g:
        return "har", (f"auto (Algorithm 1 across {n} nodes): {t} GMIs per GPU > {g} GPUs, so MRR cannot "
                       "serve it -> HAR")
    mrr, har = estimate["mrr"], estimate["har"]
    assert mrr is not None and har is not None
    pick = "mrr" if mrr <= har else "har"
    return pick, (f"auto (Algorithm 1 across {n} nodes): {t} GMIs per GPU <= {g} GPUs, so MRR can serve it; "
                  f"Table 2 with the inter-node term: MRR {mrr / har:.2f}x HAR's time -> {pick.upper()}")


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
