"""Launching a Plan: one OS process per GMI on torch.distributed.elastic, heartbeats, progress, summary."""
