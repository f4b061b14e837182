"""Population-based training: the anchors' rules and mutations (pure), and the population controller.

``rules`` and ``mutation`` are tested on tables; ``controller`` runs members as packed runs with the restart exploit
and records their lineage. DESIGN.md ("Population-based training") says what is built and what is not (the in-place
exploit, rsl_rl members, resuming a population); those are refused with exit 2 before anything starts.
"""
