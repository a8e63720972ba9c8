#!/usr/bin/env python3
"""A timing model of the deterministic backward's schedule (docs/METHOD.md, session 8): how the
launch order and the direction of each (kv head, batch) pair's dQ chain cost time against the
atomic mode. It models no memory system (no L2), only order and waits, so it ranks schedules;
the device measures them.

Model: `--slots` CTAs resident (one per SM), dispatched in launch order as slots free. A CTA (one
key tile n of one pair) walks its query tiles: per tile, T us of MMAs, then its dQ block waits for
the dQ buffer (freed by the writer after its copies read it) and, deterministic, for the chain
predecessor's release of the same query tile plus the poll latency; the writer's adds complete
`--lr` us later and release the tile. Under causal masks key tile n visits query tiles
m >= n * block_n / block_m.

Schedules (deterministic; the atomic mode launches key tiles upwards, largest first):
  head-major   decreasing key tiles per pair, pairs one after another (session 7)
  grouped      as head-major, but floor(slots / key tiles) pairs interleaved position by position
  last-asc     as head-major, the last pair's chain in increasing key tiles, its query tiles
               downwards with the heads innermost (proposed in session 8, not yet measured)

  python3 tools/bench/det_schedule_model.py --hdim 128 --seqlen 16384 --pairs 8 --gqa 4 --causal
"""
import argparse
import heapq


def visited(n, num_m, bm, bn, causal):
    return list(range((n * bn) // bm if causal else 0, num_m))


def run(order, a, det):
    """order: [(pair, n, ascending)] in launch order; returns the kernel's end time in us."""
    num_n, num_m = a.seqlen // a.bn, a.seqlen // a.bm
    released = {}
    free = [0.0] * a.slots
    last_start = end = 0.0
    for pair, n, asc in order:
        start = max(last_start, heapq.heappop(free))
        last_start = start
        tiles = visited(n, num_m, a.bm, a.bn, a.causal)
        seq = ([(g, m) for m in reversed(tiles) for g in range(a.gqa)] if asc else
               [(g, m) for g in range(a.gqa) for m in tiles])
        mma = stored = buffer_free = done = start + a.prologue
        for g, m in seq:
            mma = max(mma, stored) + a.tile_us
            stored = max(mma, buffer_free) + 0.3
            add = stored
            if det:
                pred = n - 1 if asc else n + 1
                last_visitor = min(num_n - 1, (m * a.bm + a.bm - 1) // a.bn) if a.causal else num_n - 1
                if 0 <= pred <= last_visitor:
                    add = max(add, released[(pair, g, pred, m)] + a.ls)
                released[(pair, g, n, m)] = add + a.lr
            buffer_free = add + 0.4
            done = add + a.lr
        heapq.heappush(free, done + 1.0)
        end = max(end, done + 1.0)
    return end


def orders(a):
    num_n, pairs = a.seqlen // a.bn, a.pairs
    atomic = [(p, n, True) for p in range(pairs) for n in range(num_n)]
    head_major = [(p, num_n - 1 - k, False) for p in range(pairs) for k in range(num_n)]
    per = max(1, min(pairs, a.slots // num_n)) if num_n < a.slots else 1
    grouped = [(g0 + i, num_n - 1 - k, False) for g0 in range(0, pairs, per) for k in range(num_n)
               for i in range(min(per, pairs - g0))]
    last_asc = head_major[: (pairs - 1) * num_n] + [(pairs - 1, n, True) for n in range(num_n)]
    return atomic, {"head-major": head_major, "grouped": grouped, "last-asc": last_asc}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hdim", type=int, default=128, choices=[64, 128, 256])
    ap.add_argument("--seqlen", type=int, default=8192)
    ap.add_argument("--pairs", type=int, default=16, help="kv heads x batch")
    ap.add_argument("--gqa", type=int, default=1, help="query heads per kv head")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--slots", type=int, default=132)
    ap.add_argument("--lr", type=float, default=1.5, help="us from issuing the adds to their completion")
    ap.add_argument("--ls", type=float, default=1.0, help="us from a release to the waiter seeing it")
    a = ap.parse_args()
    # The Hopper tiles (codegen/sm90a_tile_shapes.cpp) and the measured time per query tile of the
    # atomic mode (H200, bf16: ~540 TFLOP/s at hdim 64 / 128, ~370 at hdim 256).
    a.bm, a.bn = {64: (128, 128), 128: (64, 128), 256: (64, 64)}[a.hdim]
    a.tile_us = {64: 2.3, 128: 2.6, 256: 4.1}[a.hdim]
    a.prologue = 2.0
    atomic, schedules = orders(a)
    base = run(atomic, a, det=False)
    print(f"atomic {base / 1000:.2f} ms")
    for name, order in schedules.items():
        t = run(order, a, det=True)
        print(f"{name:10s} {t / 1000:.2f} ms  deterministic / atomic {base / t:.3f}")


if __name__ == "__main__":
    main()
