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
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from galinear import _io  # noqa: E402
from galinear.nn import RotorNetwork  # noqa: E402
from galinear.nn import functional as F  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"


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


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
    synchronize(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        step(model, optimizer, x, target)
        synchronize(device)
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
            f"{meta['shape']}, batch {meta['batch']}, Adam, {meta['rounds']} interleaved rounds, device {meta['device']}, "
            f"torch {meta['torch']}, {meta['threads']} threads on {meta['cpu_count']} CPUs, load average at the end "
            f"{meta['load_average_at_end'][0]:.1f}, {meta['date']}. Command: `{meta['command']}`",
            "",
            "| variant | parameters | median step (s) | x nn.Linear | x dense rotor | peak memory (MiB) | x nn.Linear |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in rows:
            mem_ratio = "-" if row["memory_vs_linear"] is None else f"{row['memory_vs_linear']:.2f}"
            lines.append(
                f"| {row['variant']} | {row['parameters']:,} | {row['median_step_s']:.3f} | {row['time_vs_linear']:.2f} | "
                f"{row['time_vs_dense']:.2f} | {row['peak_memory_mib']:.1f} | {mem_ratio} |"
            )
        lines.append("")
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
    for name in variants:  # warm-up: tables, warm starts, optimizer state
        step(*built[name])
    synchronize(device)
    times = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name in variants:
            synchronize(device)
            start = time.perf_counter()
            step(*built[name])
            synchronize(device)
            times[name].append(time.perf_counter() - start)

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

    median = {name: statistics.median(values) for name, values in times.items()}
    linear = median["linear"]
    rows = []
    for name in variants:
        rows.append({
            "variant": name,
            "parameters": parameters[name],
            "median_step_s": median[name],
            "all_steps_s": times[name],
            "time_vs_linear": median[name] / linear,
            "time_vs_dense": median[name] / median["rotor:dense"],
            "peak_memory_mib": memory[name] / 2**20,
            "memory_vs_linear": memory[name] / memory["linear"] if memory["linear"] > 0 else None,
        })
    command = "python benchmarks/bench_training_step.py " + " ".join(argv if argv is not None else sys.argv[1:])
    meta = {
        "command": command.strip(),
        "shape": f"RotorNetwork({args.width} -> {args.out}, hidden {args.hidden}) vs nn.Linear({args.width}, {args.out})",
        "batch": args.batch,
        "rounds": args.rounds,
        "device": str(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "machine": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    run = {"meta": meta, "rows": rows}
    key = f"{device.type}, {meta['threads']} threads, batch {args.batch}, {args.width}->{args.out} hidden {args.hidden}"
    runs = {}
    json_path = RESULTS / "bench_training_step.json"
    if json_path.exists() and not args.no_write:
        try:
            runs = json.loads(json_path.read_text()).get("runs", {})
        except (OSError, ValueError):
            runs = {}
    runs[key] = run  # runs with other settings (e.g. thread counts) are kept side by side
    text = render(runs)
    print(render({key: run}))
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        for name, content in (("bench_training_step.md", text), ("bench_training_step.json", json.dumps({"runs": runs}, indent=2) + "\n")):
            _io.atomic_write_text(RESULTS / name, content)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
