"""OmegaConf resolvers that conf/ YAML calls (registered by :func:`gmiexp.config.registration.register_configs`)."""

from __future__ import annotations

from gmiexp.device import HOST_DEVICES


def slurm_gpus(hardware: str, device: str, num_gpus: int) -> int | None:
    """``hydra.launcher.gpus_per_node`` of ``gmiexp_slurm``: ``num_gpus``, or none for a run without GPUs.

    Asking sbatch for GPUs a CPU run does not use fails on a cluster without gres ("Invalid generic
    resource"), and on one with GPUs holds GPUs idle.
    """
    return None if hardware == "cpu" or device in HOST_DEVICES else int(num_gpus)
