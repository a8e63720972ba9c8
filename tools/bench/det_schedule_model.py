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
               downwards with the heads innermost (session 9: main's order under causal masks)
  walk         as last-asc, the decreasing chains in the up-down walk of --up cells
               (templates/bwd/fmha_bwd_sm90a_schedule.h; session 22's candidate, causal only)

The writer is one thread per CTA (--writers 2: alternate query tiles, session 22's candidate):
it takes a tile's dQ blocks only after its previous tile's adds completed and released. Besides
the time, the model reports how long after the chain's previous key tile each (query head, query
tile) is visited again (p50 / p90 in query-tile times; the GPU streams ~8 MB of Q, dO and dQ
tiles through L2 per query-tile time at hdim 128): a proxy for whether the tile is still in L2,
which the timing itself does not model.

  python3 tools/bench/det_schedule_model.py --hdim 128 --seqlen 16384 --pairs 8 --gqa 4 --causal
"""
import argparse
import heapq


def visited(n, num_m, bm, bn, causal):
    return list(range((n * bn) // bm if causal else 0, num_m))


def walk(n, num_n, num_m, bm, bn, gqa, up):
    """The up-down walk of key tile n (causal): the first `up` own cells of n, n + 1, ... up to
    the top, then the rest of each own set from the top down; own cells of k: the query tiles
    k * bn / bm .. (k + 1) * bn / bm - 1 (the top: to the end), heads innermost."""
    r = bn // bm
    own = [[(g, m) for m in range(k * r, num_m if k == num_n - 1 else (k + 1) * r)
            for g in range(gqa)] for k in range(num_n)]
    return ([c for k in range(n, num_n) for c in own[k][:up]] +
            [c for k in range(num_n - 1, n - 1, -1) for c in own[k][up:]])


def percentile(values, q):
    return sorted(values)[int(q * (len(values) - 1))] if values else 0.0


def run(order, a, det):
    """order: [(pair, n, ascending, walks)] in launch order; returns the kernel's end time in us
    and the revisit gaps (query-tile times)."""
    num_n, num_m = a.seqlen // a.bn, a.seqlen // a.bm
    released = {}
    visits = {}  # (pair, head, query tile) -> time of the last visit's add
    gaps = []
    free = [0.0] * a.slots
    last_start = end = 0.0
    for pair, n, asc, walks in order:
        start = max(last_start, heapq.heappop(free))
        last_start = start
        tiles = visited(n, num_m, a.bm, a.bn, a.causal)
        if walks:
            seq = walk(n, num_n, num_m, a.bm, a.bn, a.gqa, a.up)
        elif asc:
            seq = [(g, m) for m in reversed(tiles) for g in range(a.gqa)]
        else:
            seq = [(g, m) for g in range(a.gqa) for m in tiles]
        mma = stored = done = start + a.prologue
        writer_free = [done] * (a.writers if det else 1)  # when each writer takes its next tile
        buffer_free = done
        for i, (g, m) in enumerate(seq):
            mma = max(mma, stored) + a.tile_us
            stored = max(mma, buffer_free) + 0.3
            writer = i % len(writer_free)
            add = max(stored, writer_free[writer])
            if det:
                pred = n - 1 if asc else n + 1
                last_visitor = min(num_n - 1, (m * a.bm + a.bm - 1) // a.bn) if a.causal else num_n - 1
                if 0 <= pred <= last_visitor:
                    add = max(add, released[(pair, g, pred, m)] + a.ls)
                released[(pair, g, n, m)] = add + a.lr
                writer_free[writer] = add + a.lr
            key = (pair, g, m)
            if key in visits:
                gaps.append((add - visits[key]) / a.tile_us)
            visits[key] = add
            buffer_free = add + 0.4
            done = add + a.lr
        heapq.heappush(free, done + 1.0)
        end = max(end, done + 1.0)
    return end, gaps


def orders(a):
    num_n, pairs = a.seqlen // a.bn, a.pairs
    atomic = [(p, n, True, False) for p in range(pairs) for n in range(num_n)]
    head_major = [(p, num_n - 1 - k, False, False) for p in range(pairs) for k in range(num_n)]
    per = max(1, min(pairs, a.slots // num_n)) if num_n < a.slots else 1
    grouped = [(g0 + i, num_n - 1 - k, False, False) for g0 in range(0, pairs, per)
               for k in range(num_n) for i in range(min(per, pairs - g0))]
    last_pair = [(pairs - 1, n, True, False) for n in range(num_n)]
    last_asc = head_major[: (pairs - 1) * num_n] + last_pair
    schedules = {"head-major": head_major, "grouped": grouped, "last-asc": last_asc}
    if a.causal:
        schedules["walk"] = [(p, n, asc, True) for p, n, asc, _ in head_major[: (pairs - 1) * num_n]]
        schedules["walk"] += last_pair
    return atomic, schedules


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
    ap.add_argument("--up", type=int, default=2, help="the walk's cells up per key tile")
    ap.add_argument("--writers", type=int, default=1, choices=[1, 2], help="dQ writers per CTA")
    ap.add_argument("--tile-us", type=float, default=0, help="us of MMAs per query tile (0: H200's)")
    a = ap.parse_args()
    # The Hopper tiles (codegen/sm90a_tile_shapes.cpp) and the measured time per query tile of the
    # atomic mode (H200, bf16: ~540 TFLOP/s at hdim 64 / 128, ~370 at hdim 256).
    a.bm, a.bn = {64: (128, 128), 128: (64, 128), 256: (64, 64)}[a.hdim]
    a.tile_us = a.tile_us or {64: 2.3, 128: 2.6, 256: 4.1}[a.hdim]
    a.prologue = 2.0
    atomic, schedules = orders(a)
    base, _ = run(atomic, a, det=False)
    print(f"atomic     {base / 1000:.2f} ms")
    for name, order in schedules.items():
        t, gaps = run(order, a, det=True)
        print(f"{name:10s} {t / 1000:.2f} ms  deterministic / atomic {base / t:.3f}  revisit p50 "
              f"{percentile(gaps, 0.5):.1f} p90 {percentile(gaps, 0.9):.1f} tiles")


if __name__ == "__main__":
    main()
