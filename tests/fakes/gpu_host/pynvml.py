"""``pynvml`` for a subprocess that must see GPUs: FAKE_NVML_GPUS H100s (MIG off) from ``tests/fakes/nvml.py``,
in compute mode FAKE_NVML_COMPUTE_MODE (NVML's value; unset: 0, default).

First on a ``python -m gmiexp`` run's PYTHONPATH, this module imports nvidia-ml-py's real ``pynvml`` (the
fake reuses its error classes) and then stands in for it in ``sys.modules``, so the run, its packed
members and their GMIs discover the same fake GPUs while torch stays on the CPU.
"""

import os
import sys
from pathlib import Path

_here = Path(__file__).resolve().parent
_saved = list(sys.path)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
del sys.modules[__name__]
import pynvml  # noqa: E402,F401  (the real one, for its error classes)

sys.path.insert(0, str(_here.parents[1]))
from fakes import nvml as _fake  # noqa: E402

sys.path[:] = _saved
_mode = int(os.environ.get("FAKE_NVML_COMPUTE_MODE", "0"))
_gpus = [_fake.h100_80gb(i, mig=0) for i in range(int(os.environ["FAKE_NVML_GPUS"]))]
for _g in _gpus:
    _g.compute_mode = _mode
sys.modules[__name__] = _fake.make(_gpus, mps_from_proc=True)
