"""Packed sweeps: the ``hydra/launcher=gmiexp_pack`` launcher's logic (slots, queue, auto packing, table).

The Hydra plugin in ``hydra_plugins/gmiexp_pack`` is thin glue; everything here is plain Python over
plain data, so it is tested without Hydra and imported only when a packed sweep launches.
"""
