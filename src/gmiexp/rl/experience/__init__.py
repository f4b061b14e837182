"""Serving roles (tcg, tdg), experience roles (tdg_ex, decoupled_async) and their weights, replay and links."""
