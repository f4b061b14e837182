"""Host shared-memory all-reduce among the GMIs of one host: the engine behind MPR and HAR's intra-GPU step.

Layout. A *header* segment holds one 64-byte line of global words (magic,
member count, abort flag, data generation and capacity) and one 64-byte line
per member (barrier epoch, posted element count, pid). A *data* segment holds
one float32 slot per member plus a result buffer, each page aligned; it is
(re)created when a call needs more elements than it holds, so members agree
on its size by construction (they all post their size first and must agree).

One reduction (n members, N elements, member i):

1. copy the flat gradient into slot i (from pinned host memory on a GPU);
   member i keeps its own chunk i in place, since only member i reads it;
2. barrier; check every member posted the same N;
3. reduce-scatter: member i sums chunk i of every slot in member order, in
   float32, in cache-sized blocks, into the result buffer (chunk boundaries
   depend only on N and n, so the sum is the same whoever computes it);
4. barrier; an optional leader step runs on the result (HAR's inter-GPU
   all-reduce) followed by one more barrier;
5. all-gather: every member copies the result buffer out.

Every member reads the same result bytes, so results are bitwise identical.

Synchronisation: a barrier over per-member epoch words (each word has a
single writer, so no atomic read-modify-write is needed), waited on with a
:class:`gmiexp.shm.wait.Backoff`: waiters spin on ``sched_yield`` for 0.1 ms,
then sleep on a futex word in the header, which the first member to see the
barrier complete bumps and wakes (Linux; each sleep is capped at 5 ms so a
wake-up lost to a race only delays, and other systems poll every 1 ms), so an
idle wait costs no CPU. Every wait has a deadline; waiters also check the pids
of the members they wait for and an abort word any member sets when it fails,
so a dead peer is reported within about 0.1 s and a hung one after
``timeout_s``, with :class:`ReductionTimeout`.

Segments (:mod:`gmiexp.shm.segment`) are named ``gmiexp_<run_tag>_<label>``,
created by the lowest member with mode 0600 (owner only), and unlinked by the
creator as soon as every member has mapped them: the mapping stays valid, and
a run that is later killed with SIGKILL leaves nothing in ``/dev/shm``.
Residual risk: the creator dying by SIGKILL between creating a segment and
every member attaching (a window of milliseconds at construction and at a
size increase) leaves that segment behind; the segment registry unlinks at
exit in every other path, the launcher removes the run's segments by tag, and
a stale segment of the same name is replaced at the next creation.

Memory ordering: plain aligned 64-bit stores and loads are used for the
flags; that is enough on x86-64 (TSO). On other CPUs a full fence is issued
around flag accesses through a libc mutex (see :func:`_fence`).
"""

from __future__ import annotations

import ctypes
import os
import platform
import time
import weakref
from collections.abc import Callable

import numpy as np
import torch

from gmiexp.device import host_staging
from gmiexp.errors import LaunchError
from gmiexp.shm import segment
from gmiexp.shm.alive import pid_alive
from gmiexp.shm.segment import Segment
from gmiexp.shm.wait import Backoff

MAGIC = 0x474D4952_45445543  # "GMIREDUC"
LINE = 64  # bytes per header line (one cache line)
PAGE = 4096
BLOCK = 1 << 14  # elements per reduce block (64 KiB, stays in L2)
ALIGN = 16  # chunk boundaries are multiples of 16 elements (one cache line of float32)
SPIN_S = 1e-4  # yield-spin this long before sleeping on the futex
SLEEP_S = 5e-3  # longest single futex sleep (bounds a missed wake-up)
MAX_SLEEP_S = 1e-3  # poll interval where futexes are unavailable
CHECK_EVERY_S = 0.05  # how often a sleeping waiter checks deadline and peer pids
_BARRIER = Backoff(spin=0, spin_s=SPIN_S, spin_yield=True, check_s=CHECK_EVERY_S)  # sleeps on the futex
DEFAULT_TIMEOUT_S = float(os.environ.get("GMIEXP_REDUCTION_TIMEOUT_S", "300"))

# global header words (int64); word 5 holds a 32-bit futex word the barrier sleeps on
_W_MAGIC, _W_N, _W_ABORT, _W_GEN, _W_CAP, _W_FUTEX = range(6)
# per-member header words
_M_EPOCH, _M_NUMEL, _M_PID = range(3)


class ReductionTimeout(LaunchError):
    """A peer of a shared-memory reduction died, hung past the timeout, or disagreed on the size."""


# ---- memory fence -----------------------------------------------------------
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
_fence_lock: Callable[[], None] | None = None


def _make_fence() -> Callable[[], None]:
    """A full fence on weakly ordered CPUs: unlock then lock a private mutex (release + acquire)."""
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(128)  # zeroed = PTHREAD_MUTEX_INITIALIZER on glibc and musl
    libc.pthread_mutex_lock(mutex)

    def fence() -> None:
        libc.pthread_mutex_unlock(mutex)
        libc.pthread_mutex_lock(mutex)

    return fence


def _fence() -> None:
    """Order earlier memory accesses before later ones (no-op on x86-64, whose TSO suffices here)."""
    global _fence_lock
    if _X86:
        return
    if _fence_lock is None:
        _fence_lock = _make_fence()
    _fence_lock()


# ---- futex (Linux): sleep until the last member of a barrier wakes us ------------
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine().lower())
_FUTEX_WAIT, _FUTEX_WAKE = 0, 1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_libc = ctypes.CDLL(None, use_errno=True) if _SYS_FUTEX is not None else None


def _futex_wait(addr: int, expected: int, timeout_s: float) -> None:
    """Sleep while the int32 at ``addr`` equals ``expected``, at most ``timeout_s`` (releases the GIL)."""
    if _libc is None:
        time.sleep(min(timeout_s, MAX_SLEEP_S))
        return
    ts = _Timespec(int(timeout_s), int((timeout_s % 1) * 1e9))
    _libc.syscall(
        _SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAIT, ctypes.c_int(expected), ctypes.byref(ts), None, 0
    )


def _futex_wake(addr: int) -> None:
    if _libc is not None:
        _libc.syscall(_SYS_FUTEX, ctypes.c_void_p(addr), _FUTEX_WAKE, ctypes.c_int(1 << 30), None, None, 0)


def _round(x: int, to: int) -> int:
    return (x + to - 1) // to * to


def chunk_bounds(numel: int, n: int) -> list[int]:
    """Fixed reduce-scatter chunk boundaries: n+1 offsets, multiples of ALIGN elements."""
    cuts = [min(numel, _round(numel * i // n, ALIGN)) for i in range(n)]
    return [*cuts, numel]


class ShmArena:
    """Member ``index`` of an ``n``-member shared-memory all-reduce named ``name``.

    Create with :meth:`create` (member 0) or :meth:`attach` (the others,
    once the creator has created: the caller orders this, e.g. with a
    process-group barrier), then every member calls :meth:`join`.
    Thread-safe to drive one arena object per thread, one thread per member.
    """

    def __init__(self, name: str, n: int, index: int, create: bool, timeout_s: float | None = None) -> None:
        if not 0 <= index < n:
            raise ValueError(f"member index {index} outside 0..{n - 1}")
        self.name = name if name.startswith("/") else "/" + name
        self.n = n
        self.index = index
        self.timeout_s = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
        hsize = _round(LINE * (1 + n), PAGE)
        self.header = segment.create(self.name[1:], hsize, replace=True) if create else segment.attach(self.name[1:])
        self._g = np.ndarray((8,), np.int64, self.header.buf, 0)
        self._epochs = np.ndarray((n,), np.int64, self.header.buf, LINE + 8 * _M_EPOCH, (LINE,))
        self._numels = np.ndarray((n,), np.int64, self.header.buf, LINE + 8 * _M_NUMEL, (LINE,))
        self._pids = np.ndarray((n,), np.int64, self.header.buf, LINE + 8 * _M_PID, (LINE,))
        self._mine = np.ndarray((8,), np.int64, self.header.buf, LINE * (1 + index))
        self._futex = np.ndarray((1,), np.int32, self.header.buf, 8 * _W_FUTEX)
        self._futex_addr = self._futex.ctypes.data
        if create:
            self._g[_W_N] = n
            self._g[_W_ABORT] = 0
            self._g[_W_GEN] = 0
            self._g[_W_CAP] = 0
            _fence()
            self._g[_W_MAGIC] = MAGIC
        elif self._g[_W_MAGIC] != MAGIC or self._g[_W_N] != n:
            raise ReductionTimeout(f"shared-memory segment {self.name} is not a {n}-member reduction arena")
        self._epoch = int(self._mine[_M_EPOCH])
        self._mine[_M_PID] = os.getpid()
        self.data: Segment | None = None
        self._gen = 0
        self.capacity = 0
        self._slots: list[np.ndarray] = []
        self._result: np.ndarray | None = None
        self._registered = False
        self._finalizer = weakref.finalize(self, _close_segments, [self.header])
        self.joined = False

    @classmethod
    def create(cls, name: str, n: int, timeout_s: float | None = None) -> ShmArena:
        return cls(name, n, 0, True, timeout_s)

    @classmethod
    def attach(cls, name: str, n: int, index: int, timeout_s: float | None = None) -> ShmArena:
        return cls(name, n, index, False, timeout_s)

    def join(self) -> None:
        """Barrier after every member attached; the creator then unlinks the header name."""
        self.barrier()
        _unlink_if_created(self.header)
        self.joined = True

    # ---- synchronisation ---------------------------------------------------
    def barrier(self) -> None:
        """Wait until every member has reached the same barrier."""
        self._epoch += 1
        _fence()
        self._mine[_M_EPOCH] = self._epoch
        self._wait(self._epoch)

    def _complete(self, target: int) -> bool:
        """True when every member reached ``target``; the first to see it wakes the sleepers."""
        if self._epochs.min() < target:
            return False
        _fence()
        word = target & 0x3FFFFFFF
        if self._futex[0] != word:
            self._futex[0] = word
            _futex_wake(self._futex_addr)
        return True

    def _wait(self, target: int) -> None:
        if self._complete(target):
            return
        deadline = time.monotonic() + self.timeout_s
        seen = 0

        def ready() -> bool:  # the futex word is read before the test, so a wake-up in between is not lost
            nonlocal seen
            seen = int(self._futex[0])
            return self._complete(target)

        _BARRIER.wait(
            ready,
            what=self.name,
            check=lambda: self._check_peers(target, time.monotonic() >= deadline),
            idle=lambda _s: _futex_wait(self._futex_addr, seen, SLEEP_S),
        )

    def _check_peers(self, target: int, expired: bool) -> None:
        late = [j for j in range(self.n) if self._epochs[j] < target]
        aborted = int(self._g[_W_ABORT])
        if aborted:
            raise self._fail(f"member {aborted - 1} of {self.name} failed; giving up")
        dead = [j for j in late if not pid_alive(int(self._pids[j]))]
        if dead:
            pids = [int(self._pids[j]) for j in dead]
            raise self._fail(f"member(s) {dead} (pid {pids}) of {self.name} died during a reduction")
        if expired:
            raise self._fail(
                f"member(s) {late} of {self.name} did not reach the barrier within {self.timeout_s:g} s "
                "(set GMIEXP_REDUCTION_TIMEOUT_S to change)"
            )

    def _fail(self, msg: str) -> ReductionTimeout:
        if not self._g[_W_ABORT]:
            self._g[_W_ABORT] = self.index + 1
        return ReductionTimeout(msg)

    # ---- data segment ------------------------------------------------------
    def _map_data(self, seg: Segment, cap: int) -> None:
        stride = _round(cap * 4, PAGE)
        self._slots = [np.ndarray((cap,), np.float32, seg.buf, j * stride) for j in range(self.n)]
        self._result = np.ndarray((cap,), np.float32, seg.buf, self.n * stride)
        self.data = seg
        self.capacity = cap

    def _grow(self, numel: int) -> None:
        """Collective: replace the data segment by one that holds ``numel`` elements."""
        old = self.data
        self._unregister()
        self._slots, self._result, self.data = [], None, None
        if old is not None:
            old.close(unmap=True)
        self._gen += 1
        cap = _round(numel, 1024)
        name = f"{self.name}_d{self._gen}"
        if self.index == 0:
            seg = segment.create(name[1:], (self.n + 1) * _round(cap * 4, PAGE), replace=True)
            self._g[_W_CAP] = cap
            _fence()
            self._g[_W_GEN] = self._gen
        self.barrier()
        if self.index != 0:
            if self._g[_W_GEN] != self._gen:
                raise self._fail(f"{self.name}: data generation mismatch ({self._g[_W_GEN]} != {self._gen})")
            seg = segment.attach(name[1:])
            cap = int(self._g[_W_CAP])
        self._map_data(seg, cap)
        self.barrier()
        _unlink_if_created(seg)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _close_segments, [self.header, seg])

    def _register(self) -> None:
        """Pin the data segment for fast device copies (once, on the first CUDA tensor)."""
        if self._registered or self.data is None:
            return
        base = self._slots[0].ctypes.data
        err = torch.cuda.cudart().cudaHostRegister(base, self.data.size, 0)
        self._registered = int(err) == 0

    def _unregister(self) -> None:
        if self._registered:
            torch.cuda.cudart().cudaHostUnregister(self._slots[0].ctypes.data)
            self._registered = False

    # ---- the reduction -----------------------------------------------------
    def buffer(self, numel: int) -> torch.Tensor:
        """The slot of this member as a float32 CPU tensor of ``numel`` elements (collective: same numel).

        Gradients flattened straight into it skip the copy into shared memory
        in :meth:`allreduce`; it stays valid until a call needs more elements.
        """
        try:
            self._mine[_M_NUMEL] = numel
            self.barrier()
            numels = self._numels.tolist()
            if any(x != numel for x in numels):
                raise self._fail(f"members of {self.name} ask for buffers of different sizes: {numels}")
            if numel > self.capacity:
                self._grow(numel)
        except ReductionTimeout:
            raise
        except BaseException:
            self._fail("")
            raise
        return torch.from_numpy(self._slots[self.index][:numel])

    def allreduce(
        self,
        flat: torch.Tensor,
        divisor: int | None = None,
        leader_step: Callable[[torch.Tensor, torch.Tensor], bool] | None = None,
        has_leader_step: bool = False,
    ) -> torch.Tensor:
        """Sum ``flat`` (1-D, any device and float dtype) in place across the members.

        With ``divisor`` the result is divided by it (fused into the copy out;
        the same bytes as dividing the sum afterwards). ``has_leader_step``
        must be the same on every member; the one member passing
        ``leader_step`` runs ``leader_step(result, flat)`` on the reduced
        float32 result before the others read it, and returns True when it
        already left the (undivided) result in ``flat``.
        """
        try:
            return self._allreduce(flat, divisor, leader_step, has_leader_step)
        except ReductionTimeout:
            raise
        except BaseException:
            self._fail("")  # let the peers fail fast instead of waiting for the timeout
            raise

    def _allreduce(
        self,
        flat: torch.Tensor,
        divisor: int | None,
        leader_step: Callable[[torch.Tensor, torch.Tensor], bool] | None,
        has_leader_step: bool,
    ) -> torch.Tensor:
        if flat.dim() != 1:
            raise ValueError(f"flat must be 1-D, got shape {tuple(flat.shape)}")
        numel = flat.numel()
        direct = flat.device.type == "cpu" and flat.dtype == torch.float32 and flat.is_contiguous()
        mine = flat.numpy() if direct else None
        if flat.is_cuda:
            self._register()
        bounds = chunk_bounds(numel, self.n)
        lo, hi = bounds[self.index], bounds[self.index + 1]
        self._mine[_M_NUMEL] = numel
        if numel <= self.capacity:
            self._write(flat, mine, numel, lo, hi)
        self.barrier()
        numels = self._numels.tolist()
        if any(x != numel for x in numels):
            raise self._fail(f"members of {self.name} reduce tensors of different sizes: {numels}")
        if numel > self.capacity:
            self._grow(numel)
            if flat.is_cuda:
                self._register()
            self._write(flat, mine, numel, lo, hi)
            self.barrier()
        # without a leader step, member i's own chunk of the result goes straight into ``mine``
        fused = mine is not None and not has_leader_step
        self._reduce_chunk(mine, lo, hi, fused, divisor)
        self.barrier()
        assert self._result is not None
        result = self._result[:numel]
        if has_leader_step:
            done = False
            if leader_step is not None:
                done = leader_step(torch.from_numpy(result), flat)
            self.barrier()
            if done:
                if divisor:
                    flat.div_(divisor)
                return flat
        if mine is not None:
            parts = ((0, lo), (hi, numel)) if fused else ((0, numel),)
            for a, b in parts:
                if divisor:
                    np.divide(result[a:b], np.float32(divisor), out=mine[a:b])
                else:
                    np.copyto(mine[a:b], result[a:b])
        else:
            flat.copy_(torch.from_numpy(result))
            if divisor:
                flat.div_(divisor)
        return flat

    def _write(self, flat: torch.Tensor, mine: np.ndarray | None, numel: int, lo: int, hi: int) -> None:
        slot = self._slots[self.index]
        if mine is not None and mine.ctypes.data == slot.ctypes.data:
            return  # ``flat`` is this member's slot (see :meth:`buffer`): nothing to copy in
        if mine is not None:  # own chunk [lo, hi) is read from ``mine`` directly
            np.copyto(slot[:lo], mine[:lo])
            np.copyto(slot[hi:numel], mine[hi:])
        else:  # device-to-host staging: CUDA copies straight into the (registered) slot
            src = flat.cpu() if host_staging(flat.device) else flat  # lazy tensors cannot write host memory
            torch.from_numpy(slot[:numel]).copy_(src)

    def _reduce_chunk(
        self, mine: np.ndarray | None, lo: int, hi: int, write_back: bool, divisor: int | None
    ) -> None:
        """Sum chunk [lo, hi) of every slot in member order into the result, block by block.

        With ``mine`` (a CPU float32 flat) this member's own chunk is read
        from it; with ``write_back`` the finished block is also written back
        into it (divided by ``divisor`` when given) while it is still in cache.
        """
        assert self._result is not None
        srcs = list(self._slots)
        if mine is not None:
            srcs[self.index] = mine
        out = self._result
        div = np.float32(divisor) if divisor else None
        for b in range(lo, hi, BLOCK):
            e = min(b + BLOCK, hi)
            o = out[b:e]
            if self.n == 1:
                np.copyto(o, srcs[0][b:e])
            else:
                np.add(srcs[0][b:e], srcs[1][b:e], out=o)
                for s in srcs[2:]:
                    np.add(o, s[b:e], out=o)
            if write_back and mine is not None:
                if div is not None:
                    np.divide(o, div, out=mine[b:e])
                else:
                    np.copyto(mine[b:e], o)

    # ---- tear-down ---------------------------------------------------------
    def close(self) -> None:
        """Unmap (and, for the creator, unlink) the segments. Not collective."""
        self._unregister()
        self._slots, self._result = [], None
        self._g = self._epochs = self._numels = self._pids = self._mine = None  # type: ignore[assignment]
        self._finalizer()


def _unlink_if_created(seg: Segment) -> None:
    """The creator removes the name once every member mapped it (the others never unlink a shared name)."""
    if seg.owner:
        seg.unlink()


def _close_segments(segments: list[Segment]) -> None:
    for s in segments:
        s.close(unmap=True)  # the arena dropped its views first
