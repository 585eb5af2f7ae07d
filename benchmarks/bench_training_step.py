"""One training step of the paper's rotor network vs nn.Linear, side by side.

A step = zero_grad, forward (which refreshes the rotors' warm-start vectors), MSE loss, backward,
Adam step. Shape: the paper's LLaMA-3.2-1B q projection (2048 -> 2048, hidden 2048), batch 256.
Variants: RotorNetwork with the "dense" backend (builds every 2**11 x 2**11 sandwich matrix, as
the authors do), with the "factored" backend (simple rotors applied directly), with any other
registered backend for the device (e.g. a compiled kernel), and nn.Linear(2048, 2048).

Timings are interleaved (one step of each variant per round) and reported as medians and
ratios, so that load from other processes affects every variant alike. Peak memory: on CUDA
torch.cuda.max_memory_allocated; on CPU the peak resident set during one step above the
resident set before it (Linux VmHWM), measured in a fresh subprocess per variant.

    python benchmarks/bench_training_step.py [--batch 256] [--rounds 5] [--device cpu]

Writes benchmarks/results/bench_training_step.{md,json}.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, command_line, header, markdown_table, metadata, ratio, round_robin,  # noqa: E402
                     torch_sync, write_json, write_text)
from galinear.nn import RotorNetwork  # noqa: E402
from galinear.nn import functional as F  # noqa: E402


def build(variant: str, args):
    torch.manual_seed(0)
    device = torch.device(args.device)
    if variant == "linear":
        model = torch.nn.Linear(args.width, args.out, bias=False, device=device)
        lr = 1e-3
    else:
        backend = variant.split(":", 1)[1]
        model = RotorNetwork(args.width, args.out, hidden=args.hidden, backend=backend, device=device)
        lr = 0.05  # the paper's rate for rotor layers
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    x = torch.randn(args.batch, args.width, device=device)
    target = torch.randn(args.batch, args.out, device=device)
    return model, optimizer, x, target


THREADS = None  # set by --threads; re-applied at every step because a numba OpenMP layer may change it


def step(model, optimizer, x, target):
    if THREADS:
        torch.set_num_threads(THREADS)
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    return loss.detach()


def rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def peak_memory(variant: str, args) -> float:
    """Bytes: CUDA peak allocation, or growth of the CPU peak RSS over one (second) step."""
    model, optimizer, x, target = build(variant, args)
    device = torch.device(args.device)
    step(model, optimizer, x, target)  # first step: lazy tables, optimizer state
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        step(model, optimizer, x, target)
        torch.cuda.synchronize(device)
        return float(torch.cuda.max_memory_allocated(device) - base)
    base = rss_bytes()
    with open("/proc/self/clear_refs", "w") as handle:  # Linux: reset the peak RSS (VmHWM) to now
        handle.write("5")
    step(model, optimizer, x, target)
    return float(peak_rss_bytes() - base)


def variants_for(args) -> list[str]:
    device = torch.device(args.device)
    names = ["rotor:dense", "rotor:factored"]
    for name in F.available_sandwich_backends(device, torch.float32):
        if name not in ("dense", "factored"):
            names.append(f"rotor:{name}")
    return names + ["linear"]


def render(runs: dict) -> str:
    lines = ["# One training step: RotorNetwork (dense / factored / other backends) vs nn.Linear", ""]
    for key, run in runs.items():
        meta, rows = run["meta"], run["rows"]
        lines += [
            f"## {key}",
            "",
            header(meta) + f" {meta['shape']}, batch {meta['batch']}, Adam, {meta['rounds']} interleaved rounds, "
            f"device {meta['device']}, load average at the end {meta['load_average_at_end'][0]:.1f}.",
            "",
            markdown_table(
                ["variant", "parameters", "median step (s)", "x nn.Linear", "x dense rotor", "peak memory (MiB)",
                 "x nn.Linear"],
                ([row["variant"], f"{row['parameters']:,}", f"{row['median_step_s']:.3f}", ratio(row["time_vs_linear"]),
                  ratio(row["time_vs_dense"]), f"{row['peak_memory_mib']:.1f}", ratio(row["memory_vs_linear"])]
                 for row in rows)),
            "",
        ]
    lines += [
        "A step = zero_grad, forward (rotor warm-start refresh included), MSE, backward, Adam step.",
        "Peak memory on CPU: peak resident set during one step (after a warm-up step) above the resident set "
        "before it (Linux VmHWM, reset through /proc/self/clear_refs), each variant in a fresh process with "
        "MALLOC_MMAP_THRESHOLD_=65536 so that freed tensors leave the resident set; on CUDA max_memory_allocated.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--out", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--memory-of", help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="folder of bench_training_step.{md,json} (runs with other settings in it are kept)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    global THREADS
    if args.threads:
        THREADS = args.threads
        torch.set_num_threads(args.threads)
    if args.memory_of:
        print(json.dumps({"peak_bytes": peak_memory(args.memory_of, args)}))
        return 0

    device = torch.device(args.device)
    variants = variants_for(args)
    built = {name: build(name, args) for name in variants}
    parameters = {name: sum(p.numel() for p in built[name][0].parameters()) for name in variants}
    # a warm-up round (tables, warm starts, optimizer state), then interleaved rounds
    timings = round_robin({name: (lambda name=name: step(*built[name])) for name in variants}, args.rounds,
                          sync=torch_sync(device))

    memory = {}
    for name in variants:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            memory[name] = peak_memory(name, args)
        else:
            command = [sys.executable, __file__, "--memory-of", name, "--batch", str(args.batch), "--width",
                       str(args.width), "--hidden", str(args.hidden), "--out", str(args.out), "--device", args.device,
                       "--threads", str(torch.get_num_threads())]
            # every allocation over 64 KiB gets its own mapping and is returned on free, so the
            # resident set follows the live tensors instead of the allocator's retained heap
            env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
            result = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
            memory[name] = json.loads(result.stdout.strip().splitlines()[-1])["peak_bytes"]

    median = {name: timing.median for name, timing in timings.items()}
    linear = median["linear"]
    rows = []
    for name in variants:
        rows.append({
            "variant": name,
            "parameters": parameters[name],
            "median_step_s": median[name],
            "all_steps_s": list(timings[name].samples),
            "time_vs_linear": median[name] / linear,
            "time_vs_dense": median[name] / median["rotor:dense"],
            "peak_memory_mib": memory[name] / 2**20,
            "memory_vs_linear": memory[name] / memory["linear"] if memory["linear"] > 0 else None,
        })
    meta = metadata(
        command_line(__file__, argv, make_target="bench-nn"),
        shape=f"RotorNetwork({args.width} -> {args.out}, hidden {args.hidden}) vs nn.Linear({args.width}, {args.out})",
        batch=args.batch, rounds=args.rounds, device=str(device), load_average_at_end=os.getloadavg())
    run = {"meta": meta, "rows": rows}
    key = (f"{device.type}, {meta['torch_threads']} threads, batch {args.batch}, {args.width}->{args.out} "
           f"hidden {args.hidden}")
    runs = {}
    json_path = args.results / "bench_training_step.json"
    if json_path.exists() and not args.no_write:
        try:
            runs = json.loads(json_path.read_text()).get("runs", {})
        except (OSError, ValueError):
            runs = {}
    runs[key] = run  # runs with other settings (e.g. thread counts) are kept side by side
    text = render(runs)
    print(render({key: run}))
    if not args.no_write:
        write_json(json_path, {"runs": runs}, indent=2)
        write_text(args.results / "bench_training_step.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
