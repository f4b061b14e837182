"""rl-games integration: GMI-aware PPO agents, the built-in PPO role, observers."""
