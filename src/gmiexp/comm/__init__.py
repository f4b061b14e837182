"""GMI communication: the manager (groups, point-to-point), gradient reductions, channels, store."""
