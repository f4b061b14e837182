"""rsl_rl's OnPolicyRunner and PPO in every GMI of tcg_ex (``train=rslrl``), gradients through the Plan's reduction.

``config`` is light (YAML only: the planner reads it); the other modules import rsl_rl and run in the GMIs.
"""
