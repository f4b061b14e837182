"""``hydra/launcher=gmiexp_pack``: run a gmiexp multirun's members concurrently, packed onto shared GPUs."""
