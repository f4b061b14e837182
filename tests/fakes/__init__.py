"""Faithful stand-ins for NVIDIA's tools (MPS control daemon, NVML) used by the backend tests."""
