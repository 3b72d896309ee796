"""What the torch benchmarks share: timing several callables side by side."""

import statistics
import time


def interleaved_ms(fns, count):
    """Median ms of each of `fns` (name: callable), timed round-robin after
    one warm-up call each (which compiles), so that a slow stretch of the
    machine falls on all of them alike."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(count):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: 1e3 * statistics.median(t) for name, t in times.items()}
