"""Hydra's side of the schemas: store them in the ConfigStore and register the resolvers conf/ YAML calls."""

from __future__ import annotations

from gmiexp.config.help import help_text
from gmiexp.config.mjlab_tasks import register_source
from gmiexp.config.resolvers import slurm_gpus
from gmiexp.config.rlgames_pbt import register_resolver as register_pbt_resolver
from gmiexp.config.rlgames_yaml import register_resolver
from gmiexp.config.schema import BACKEND_SCHEMAS, GROUP_SCHEMAS, Config


def register_configs() -> None:
    """Store the schemas so ``conf/config.yaml`` and every group YAML extend them."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    register_resolver()  # ${rlgames:...}: train=rlgames imports an rl-games YAML at compose time
    register_pbt_resolver()  # ${rlgames_pbt:...}: pbt=rlgames reads that file's pbt: section
    OmegaConf.register_new_resolver("gmiexp_fields", help_text, replace=True)  # --help (conf/config.yaml)
    OmegaConf.register_new_resolver("gmiexp_slurm_gpus", slurm_gpus, replace=True)  # launcher gmiexp_slurm
    register_source()  # task=<any mjlab task id> (hydra.searchpath in conf/config.yaml: gmiexp-mjlab://tasks)
    cs = ConfigStore.instance()
    cs.store(name="gmiexp_schema", node=Config)
    # At the top level, not in the groups: a schema stored in a group would be listed (and selectable) as one
    # of its options. A group's YAML extends its schema with ``defaults: [/<group>_schema@_here_]``.
    for group, schema in GROUP_SCHEMAS.items():
        cs.store(name=f"{group}_schema", node=schema)
    for option, schema in BACKEND_SCHEMAS.items():
        cs.store(name=f"backend_{option}_schema", node=schema)
