"""Population-based training: the anchors' rules and mutations (pure), and the population controller.

``rules`` and ``mutation`` are tested on tables; ``controller`` runs members as packed runs, exploits in place over
shared memory (:mod:`gmiexp.rl.exploit`) or by restart, and records their lineage. DESIGN.md ("Population-based
training") says what is built and what is not (rsl_rl members, resuming a population); those are refused with exit
2 before anything starts.
"""
