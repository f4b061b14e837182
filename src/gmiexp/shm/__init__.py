"""Shared memory for every cross-process path: reductions, channels, the experience store, weights.

* :mod:`~gmiexp.shm.names`: ``gmiexp_<run tag>_<name>`` segment names and the run tag;
* :mod:`~gmiexp.shm.segment`: the one :class:`Segment` (create, attach, unlink) and its exit registry;
* :mod:`~gmiexp.shm.cleanup`: removing what crashed or killed runs left in ``/dev/shm``;
* :mod:`~gmiexp.shm.alive`: whether a peer pid still runs;
* :mod:`~gmiexp.shm.wait`: the spin/yield/backoff wait with deadline and liveness checks.
"""
