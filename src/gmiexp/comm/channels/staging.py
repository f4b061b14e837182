"""Pinned host staging for experience produced on a GPU.

Rings live in ordinary shared host memory. A GPU tensor is first copied with ``non_blocking=True``
into a page-locked (pinned) host buffer that is reused across batches (pageable destinations make
CUDA copies synchronous and slower), one stream sync per batch, and then memcpy'd into the ring by
the Compressor. On the trainer side, ``to_device`` moves a received CPU batch with a pinned bounce
buffer likewise. Without CUDA (or for CPU tensors) both are identities: this path only runs on GPU hosts.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


class PinnedStaging:
    """Reusable pinned buffers, one per field name, grown on demand."""

    def __init__(self) -> None:
        self._bufs: dict[str, torch.Tensor] = {}

    def _buf(self, key: str, like: torch.Tensor) -> torch.Tensor:
        nbytes = like.numel() * like.element_size()
        buf = self._bufs.get(key)
        if buf is None or buf.numel() < nbytes:
            buf = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
            self._bufs[key] = buf
        return buf[:nbytes].view(like.dtype).view(like.shape)

    def to_host(self, parts: Mapping[str, torch.Tensor]) -> Mapping[str, torch.Tensor]:
        """CPU views of ``parts``; GPU tensors go through the pinned buffers (valid until next call)."""
        for t in parts.values():
            if t.is_cuda:
                break
        else:
            return parts
        out = {}
        for k, t in parts.items():
            if t.is_cuda:
                host = self._buf(k, t)
                host.copy_(t, non_blocking=True)
                out[k] = host
            else:
                out[k] = t
        torch.cuda.current_stream().synchronize()
        return out

    def to_device(self, batch: Mapping[str, torch.Tensor], device: torch.device | str) -> dict[str, torch.Tensor]:
        """Move a CPU batch to ``device`` through pinned buffers (asynchronous H2D copies)."""
        device = torch.device(device)
        if device.type != "cuda":
            return {k: v.to(device) for k, v in batch.items()}
        out = {}
        for k, t in batch.items():
            host = self._buf("h2d-" + k, t)
            host.copy_(t)
            out[k] = host.to(device, non_blocking=True)
        torch.cuda.current_stream().synchronize()  # the pinned buffers are reused next call
        return out
