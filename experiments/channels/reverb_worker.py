"""Reverb half of bench.py; runs under the Reverb venv's interpreter (TF 2.15, numpy < 2).

A server with a FIFO queue table (max 8 items) runs in this process; one spawned producer
inserts experience batches through a client, and this process samples them through another.
Prints one JSON line: {"items": timed items, "seconds": elapsed}.
"""

import json
import multiprocessing as mp
import sys
import time

import numpy as np

ROW_SHAPES = {"obs": (52,), "actions": (8,), "rewards": (), "values": (), "dones": (), "neglogp": ()}


def batch(nbytes: int, envs: int) -> list[np.ndarray]:
    steps = nbytes // 256 // envs
    return [np.random.rand(steps, envs, *s).astype(np.float32) for s in ROW_SHAPES.values()]


def produce(port: int, nbytes: int, n: int, envs: int) -> None:
    import reverb

    client = reverb.Client(f"localhost:{port}")
    data = batch(nbytes, envs)
    for _ in range(n):
        client.insert([d.copy() for d in data], priorities={"q": 1.0})


def main() -> None:
    import reverb

    nbytes, n, envs = (int(x) for x in sys.argv[1:4])
    server = reverb.Server(tables=[reverb.Table.queue("q", max_size=8)])
    p = mp.get_context("spawn").Process(target=produce, args=(server.port, nbytes, n, envs))
    p.start()
    client = reverb.Client(f"localhost:{server.port}")
    sink = [np.empty(d.shape, d.dtype) for d in batch(nbytes, envs)]  # same consumer copy as bench.Sink

    def take(sample) -> None:
        data = (sample[0] if isinstance(sample, list) else sample).data  # one timestep: the 6 fields
        for dst, src in zip(sink, data, strict=True):
            np.copyto(dst, src)

    it = client.sample("q", num_samples=n)
    take(next(it))
    t0 = time.perf_counter()
    got = 0
    for s in it:
        take(s)
        got += 1
    secs = time.perf_counter() - t0
    p.join()
    server.stop()
    print(json.dumps({"items": got, "seconds": secs}))


if __name__ == "__main__":
    main()
