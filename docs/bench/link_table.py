#!/usr/bin/env python3
"""Markdown tables of docs/bench/link_bench.sh's JSON lines (docs/lab.md).

    docs/bench/link_table.py results.jsonl

One table per link rate; per hook and world size: the median time, its
ratio to the raw fp32 allreduce of the same run, to its wire bound, and to
issue 22's target, max(wire bound, the same hook's time without a link),
and how busy the machine's cores were during the hook.
"""
import json
import sys

LABELS = {
    "allreduce.yaml": "`default/allreduce`",
    "fp16.yaml": "`default/fp16_compress`",
    "bf16.yaml": "`default/bf16_compress`",
    "quantization_rs8.yaml": "`quantization/per_channel`, reduce_scatter, 8 bits",
    "quantization_rs4_ef.yaml": "the same, 4 bits + error feedback",
    "psgd1.yaml": "`powersgd`, rank 1",
    "psgd4.yaml": "`powersgd`, rank 4",
}


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    loopback, linked = {}, {}
    for r in rows:
        key = (r["world"], r["config"].split("/")[-1])
        table = linked.setdefault(r["link"], {}) if "link" in r else loopback
        table.setdefault(key, r)  # allreduce runs twice per world: keep the first
    for link, table in linked.items():
        print(f"**{link}**\n")
        print("| hook | world | time | vs raw allreduce | vs its wire bound "
              "| without the link | vs max(wire bound, without the link) | cores busy |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, label in LABELS.items():
            for world in sorted({w for w, _ in table}):
                r = table.get((world, name))
                if r is None:
                    continue
                t = r["median_s"]
                bound = r["wire_bound_s"]
                base = loopback.get((world, name), {}).get("median_s")
                target = f"{t / max(bound, base):.2f}" if base else "-"
                free = f"{base * 1e3:.1f} ms" if base else "-"
                busy = f"{100 * r['cores_busy']:.0f}%" if "cores_busy" in r else "-"
                print(f"| {label} | {world} | {t * 1e3:.1f} ms "
                      f"| {t / r['baseline_allreduce_median_s']:.3f} | {t / bound:.2f} "
                      f"| {free} | {target} | {busy} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
