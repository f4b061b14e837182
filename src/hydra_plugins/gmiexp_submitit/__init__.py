"""``hydra/launcher=gmiexp_slurm``: hydra-submitit-launcher whose failed members end FAILED in Slurm."""
