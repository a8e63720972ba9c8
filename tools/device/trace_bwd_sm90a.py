#!/usr/bin/env python3
"""Summarises the per-CTA timings of the Hopper backward's stage 2 written by the trace patch
(tools/device/patches/bwd-sm90a-trace.patch, FMHA_JIT_TRACE=FILE): where a CTA's time goes, per
query tile, and how busy the SMs were, for the last launch in each file.

A file holds one block per launch: an int64 CTA count n, then n records of 24 int64 (the CTA's
linear launch index is its record's position):
   0 SM id, 1 key tile (n_block), 2 kv head, 3 batch, 4 writer 0 start (globaltimer, ns),
   5 writer 0 end (ns), 6-10 writer 0 cycles waiting for the consumers' dQ blocks (full), for its
   turn (poll), for the bulk copies to read shared memory (read), for the adds to complete and the
   release (done), and ns from start to its first turn; 11-15 the same for writer 1 (the hdim 256
   kernel's second dQ round); 16-17 cycles each consumer warpgroup waited for a free dQ block
   (stall; the hdim 64 / 128 kernel too from session 26); 18-19 each consumer warpgroup's end
   (ns); 20 query tiles the CTA visited (0 from builds before session 24); 21-22 cycles each
   consumer warpgroup of the hdim 64 / 128 kernel waited for its Q and dO tiles (input; session
   26 on).
Cycle counts assume the H200's / H100's 1980 MHz boost clock (--mhz to change).

Usage: trace_bwd_sm90a.py [--mhz F] FILE:TILES [FILE:TILES ...], TILES = query tiles per CTA
(seqlen_q / 64 at hdim 256 without GQA), or 0 to take each CTA's own count from its record
(causal masks, where CTAs differ).
"""
import argparse
import struct

RECORD = 24


def last_launch(path):
    data = open(path, "rb").read()
    # Step over the blocks by their counts; only the last one is unpacked.
    offset, last = 0, 0
    while offset < len(data):
        last = offset
        (n,) = struct.unpack_from("<q", data, offset)
        offset += 8 + n * RECORD * 8
    (n,) = struct.unpack_from("<q", data, last)
    flat = struct.unpack_from("<%dq" % (n * RECORD), data, last + 8)
    return [flat[i * RECORD:(i + 1) * RECORD] for i in range(n)]


def summarise(records, tiles, mhz):
    def cycles_us(rec, field):
        return (rec[field] & 0xFFFFFFFF) / mhz

    def mean(values):
        return sum(values) / len(values)

    ends = [max(r[18], r[19]) or r[5] for r in records]
    starts = [r[4] for r in records]
    span_us = (max(ends) - min(starts)) / 1e3
    durations = [(e - s) / 1e3 for s, e in zip(starts, ends)]
    sms = len({r[0] for r in records})
    rounds = 2 if any(r[11:16] != (0,) * 5 for r in records) else 1

    counts = [tiles or r[20] for r in records]
    if min(counts) <= 0:
        raise SystemExit("TILES = 0 needs records with the visit count (field 20)")
    total = sum(counts)

    def per_tile(field):
        return sum(sum(cycles_us(r, field + 5 * k) for k in range(rounds)) / rounds
                   for r in records) / total

    return {
        "span_us": span_us,
        "sm_busy": sum(durations) / (span_us * sms),
        "cta_us": mean(durations),
        "tile_us": sum(durations) / total,
        "consumer_stall": sum((cycles_us(r, 16) + cycles_us(r, 17)) / 2 for r in records) / total,
        "consumer_input": sum((cycles_us(r, 21) + cycles_us(r, 22)) / 2 for r in records) / total,
        "writer_full": per_tile(6),
        "writer_poll": per_tile(7),
        "writer_read": per_tile(8),
        "writer_done": per_tile(9),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", metavar="FILE:TILES")
    parser.add_argument("--mhz", type=float, default=1980.0)
    args = parser.parse_args()
    for spec in args.files:
        path, tiles = spec.rsplit(":", 1)
        s = summarise(last_launch(path), int(tiles), args.mhz)
        print(f"{path}: span {s['span_us']:.1f} us, SMs busy {s['sm_busy']:.3f}, "
              f"CTA {s['cta_us']:.1f} us = {s['tile_us']:.2f} us per query tile; per tile (us): "
              f"consumer stall {s['consumer_stall']:.2f} input {s['consumer_input']:.2f}, "
              f"writer full {s['writer_full']:.2f} "
              f"poll {s['writer_poll']:.2f} read {s['writer_read']:.2f} "
              f"done {s['writer_done']:.2f}")


if __name__ == "__main__":
    main()
