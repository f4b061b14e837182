"""rl-games integration: GMI-aware PPO agents, the PPO role (tcg_ex), observer, params, model, checkpoints, sync."""
