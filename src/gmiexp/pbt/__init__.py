"""Population-based training: the anchors' rules and mutations (pure), and the population controller.

``rules`` and ``mutation`` are tested on tables; ``controller`` runs members as packed runs, exploits in place over
shared memory (:mod:`gmiexp.rl.exploit`) or by restart, records their lineage in a log that ``state`` replays (the
same command goes on with a stopped population; a failed member is restarted or replaced) and ``views`` shows.
DESIGN.md ("Population-based training") says what is built and what is not; what is not is refused with exit 2
before anything starts.
"""
