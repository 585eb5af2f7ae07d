"""Rotor sandwich backends side by side: what `auto` picks, peak memory, and one-token latency.

    python benchmarks/bench_backends.py [--n 3 5 7 9 11] [--batches 1 32 512] [--device cpu] [--threads T]
    python benchmarks/bench_backends.py --memory [--tokens 64] [--n 11]
    python benchmarks/bench_backends.py --decode

Backends (default): for every n, batch and mode ("training": forward + backward of a whole
RotorLinear(d, d), d = max(2**n, 512), bivectors requiring gradients; "inference": eval-mode
forward without gradients, caches warm) the median time of each backend, interleaved round by
round, the backend that ``backend="auto"`` runs there (:func:`galinear.nn.functional.plan.plan`;
"decode" for the decoding kernel) and whether its time is within 10 % of the fastest. These
measurements set the matrix and decoding thresholds of galinear/_switch_points.py.

Memory: peak bytes of live tensors (torch allocations seen by a dispatch mode, numpy ones by
tracemalloc) during forward + backward of the map with the exact gradient
(``galinear.nn.dexp.exact_rotor_sandwich``, gradients in x and the bivectors; the backend runs
the map on x and the transposed map on the output gradient), above those alive before, in units
of the input x (``activations``); ``extra`` subtracts the three that any map has (y, its
gradient, the input gradient).

Decode: per-call time of RotorLinear(576, 576) and RotorNetwork(576, 576, hidden 512) on one
token (eval, no grad, 1 thread) against F.linear(576, 576), and the overhead beyond the
arithmetic (the same module's time minus its matrices applied by plain torch calls).
"""
from __future__ import annotations

import argparse
import sys
import tracemalloc
import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (command_line, header, markdown_table, metadata, ratio, round_robin,  # noqa: E402
                     set_threads, statistic, torch_sync)
from galinear.nn import RotorLinear, RotorNetwork  # noqa: E402
from galinear.nn import functional as F  # noqa: E402
from galinear.nn.functional import plan as dispatch  # noqa: E402


def measure_table(ns, batches, device, rounds) -> list[dict]:
    rows = []
    backends = F.available_sandwich_backends(device, torch.float32)
    for n in ns:
        d = max(2**n, 512)
        for batch in batches:
            for mode in dispatch.MODES:
                torch.manual_seed(0)
                layers = {name: RotorLinear(d, d, chunk_size=2**n, backend=name, device=device)
                          for name in ("auto", *backends)}
                for other in layers.values():
                    other.load_state_dict(layers["auto"].state_dict())
                x = torch.randn(batch, d, device=device)
                calls = {}
                for name, layer in layers.items():
                    if mode == "training":
                        def call(layer=layer):
                            layer.zero_grad(set_to_none=True)
                            layer(x).square().sum().backward()
                    else:
                        layer.eval()

                        def call(layer=layer):
                            with torch.no_grad():
                                layer(x)
                    calls[name] = call
                median = statistic(round_robin(calls, rounds, sync=torch_sync(device)))
                best = min(backends, key=median.get)
                with torch.set_grad_enabled(mode == "training"):
                    picked = layers["auto"]._plan(batch, x, mode == "training")
                rows.append({"n": n, "d": d, "batch": batch, "mode": mode, "threads": torch.get_num_threads(),
                             "seconds": median, "best": best, "auto": "decode" if picked.decode else picked.backend or dispatch.MATRICES,
                             "rule": picked.rule, "auto_within_10pct": median["auto"] <= 1.1 * median[best]})
                print(f"n={n} d={d} batch={batch} {mode}: " + ", ".join(
                    f"{name} {seconds * 1e3:.2f} ms" for name, seconds in median.items())
                    + f" -> fastest {best}; auto runs {rows[-1]['auto']} ({picked.rule})"
                    + ("" if rows[-1]["auto_within_10pct"] else "; auto NOT within 10 %"), flush=True)
    return rows


class LiveBytes(TorchDispatchMode):
    """Bytes of the torch storages alive, and their peak, counted from every op's outputs."""

    def __init__(self):
        super().__init__()
        self.live, self.now, self.peak = {}, 0, 0

    def _release(self, key):
        self.now -= self.live.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
                storage = tensor.untyped_storage()
                key = storage.data_ptr()
                if key in self.live or storage.nbytes() == 0:
                    continue
                self.live[key] = storage.nbytes()
                self.now += storage.nbytes()
                self.peak = max(self.peak, self.now + _numpy_now())
                weakref.finalize(storage, self._release, key)
        return out


def _numpy_now():
    return tracemalloc.get_traced_memory()[0] if tracemalloc.is_tracing() else 0


def peak_activations(backend: str, n: int, tokens: int) -> dict:
    from galinear.nn.dexp import exact_rotor_sandwich

    torch.manual_seed(0)
    x = torch.randn(tokens, 1, 2**n, requires_grad=True)
    bivectors = (0.3 * torch.randn(1, n * (n - 1) // 2)).requires_grad_(True)
    with torch.no_grad():
        dec = F.invariant_decomposition(bivectors, method="exact")

    def run(x):
        return exact_rotor_sandwich(x, bivectors, None, (dec.V, dec.W), backend=backend)

    with torch.no_grad():
        run(x)  # warm-up: tables, compilation
    tracemalloc.start()
    tracemalloc.reset_peak()
    with LiveBytes() as meter:
        y = run(x)
        y.backward(torch.ones_like(y))
        del y
    numpy_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak = max(meter.peak, numpy_peak)
    units = x.numel() * x.element_size()
    return {"backend": backend, "n": n, "tokens": tokens, "peak_bytes": peak,
            "activations": peak / units, "extra": peak / units - 3}


def decode_latency(rounds: int) -> list[dict]:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(1, 576)
    dense = torch.nn.Linear(576, 576, bias=False)
    layer = RotorLinear(576, 576).eval()
    network = RotorNetwork(576, 576, hidden=512).eval()
    with torch.no_grad():
        weights = {name: m.assembled_weight() for name, m in network.named_modules() if isinstance(m, RotorLinear)}
        layer_weight = layer.assembled_weight()

        def plain_network():  # the same arithmetic by plain torch calls on the cached matrices
            def block(name, permutation, h):
                z = torch.nn.functional.linear(h, weights[name])[..., permutation]
                return network.activation(torch.nn.functional.layer_norm(z, (network.hidden,), eps=network.eps))

            h = block("input_gadget", network.input_permutation, x)
            for i in range(network.hidden_layers):
                h = sum(network.branch_weights[i, b] * block(f"hidden_gadgets.{i}.{b}", network.hidden_permutations[i, b], h)
                        for b in range(network.breadth))
            return torch.nn.functional.linear(h, weights["output_gadget"])

        stages = network._fused_weights()

        def plain_stages():  # the network's inference arithmetic (stacked, permuted matrices) alone
            f = torch.nn.functional
            h = network.activation(f.layer_norm(f.linear(x, stages[0][0]), (network.hidden,), eps=network.eps))
            for i in range(network.hidden_layers):
                z = f.linear(h, stages[1 + i][0]).view(1, network.breadth, network.hidden)
                h = torch.matmul(network.branch_weights[i],
                                 network.activation(f.layer_norm(z, (network.hidden,), eps=network.eps)))
            return f.linear(h, stages[-1][0])

        decoder = network._decode_state()  # a CheckedNetwork: its tables were checked when it was built
        x_np = x.numpy()
        calls = {
            "F.linear(576, 576)": lambda: dense(x),
            "RotorLinear(576, 576)": lambda: layer(x),
            "its matrix by F.linear": lambda: torch.nn.functional.linear(x, layer_weight),
            "RotorNetwork(576, 576, hidden 512)": lambda: network(x),
            "its matrices by plain torch calls": plain_network,
            "its stacked matrices by plain torch calls": plain_stages,
            "its compiled decoding kernel alone": lambda: decoder(x_np),
        }
        torch.testing.assert_close(network(x), plain_network())
        torch.testing.assert_close(network(x), plain_stages())
        median = statistic(round_robin(calls, rounds))
    rows = [{"call": name, "us": seconds * 1e6, "vs_linear": median["F.linear(576, 576)"] / seconds}
            for name, seconds in median.items()]
    rows.append({"call": "RotorLinear overhead", "us": (median["RotorLinear(576, 576)"]
                                                        - median["its matrix by F.linear"]) * 1e6})
    rows.append({"call": "RotorNetwork overhead", "us": (median["RotorNetwork(576, 576, hidden 512)"]
                                                         - median["its compiled decoding kernel alone"]) * 1e6})
    # d = 2048, one chunk: each backend side by side with F.linear (all interleaved, so every
    # weight is read back from memory after the others' calls, as in a model of many layers)
    x = torch.randn(1, 2048)
    big = torch.nn.Linear(2048, 2048, bias=False)
    layers = {name: RotorLinear(2048, 2048, backend=name).eval() for name in ("auto", "numba", "spinor", "dense")}
    for other in layers.values():
        other.load_state_dict(layers["auto"].state_dict())
    with torch.no_grad():
        calls = {"F.linear(2048, 2048)": lambda: big(x)}
        calls.update({f"RotorLinear(2048, 2048), {name}": (lambda m=m: m(x)) for name, m in layers.items()})
        median = statistic(round_robin(calls, rounds))
        plan = layers["auto"]._plan(1, x, False)
        picked = "the decoding kernel" if plan.decode else plan.label
    rows += [{"call": name + (f" (picks {picked})" if name.endswith("auto") else ""),
              "us": seconds * 1e6, "vs_linear": median["F.linear(2048, 2048)"] / seconds}
             for name, seconds in median.items()]
    # the cached (out, in) matrix against the compiled decoding kernel, by layer shape and tokens
    for shape in ((1024, 1024, 128), (512, 512, 64), (576, 576, None), (256, 256, None), (2048, 2048, 512),
                  (2048, 2048, None)):
        probe = RotorLinear(shape[0], shape[1], chunk_size=shape[2], backend="dense").eval()
        for tokens in (1, 8, 32):
            xs = torch.randn(tokens, shape[0])
            with torch.no_grad():
                pair = statistic(round_robin({"matrix": lambda: probe(xs), "decode": lambda: probe.decode(xs)}, rounds))
            rows.append({"call": f"RotorLinear{shape[:2]} chunk 2^{probe.n}, {probe.pairs} pairs, {tokens} tokens: "
                                 f"matrix {pair['matrix'] * 1e6:.0f} us / decode", "us": pair["decode"] * 1e6,
                         "vs_linear": pair["matrix"] / pair["decode"]})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=None)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32, 512])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--memory", action="store_true", help="peak memory of forward + backward per backend")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--decode", action="store_true", help="one-token latency and per-call overhead")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: n = 5 (unless --n), batches 1 and 32, 16 tokens; --decode with --rounds "
                             "as given (otherwise at least 200)")
    args = parser.parse_args(argv)
    if args.threads:
        set_threads(args.threads)
    if args.quick:
        args.n, args.batches, args.tokens = args.n or [5], [1, 32], 16
    if args.memory:
        rows = [peak_activations(backend, n, args.tokens)
                for n in args.n or [11] for backend in F.available_sandwich_backends("cpu", torch.float32)]
        print(header(metadata(command_line(__file__, argv))))
        print(markdown_table(
            ["backend", "n", "tokens", "peak (MiB)", "activations", "extra beyond y, dy, dx"],
            ([row["backend"], row["n"], row["tokens"], row["peak_bytes"] / 2**20, row["activations"], row["extra"]]
             for row in rows), formats=[None, None, None, ".1f", ".1f", ".1f"]))
        return 0
    if args.decode:
        rows = decode_latency(args.rounds if args.quick else max(args.rounds, 200))
        print(header(metadata(command_line(__file__, argv))))
        print(markdown_table(
            ["call (1 token, eval, no grad, 1 thread)", "us", "F.linear / this"],
            ([row["call"], row["us"], ratio(row.get("vs_linear"))] for row in rows), formats=[None, ".1f", None]))
        return 0
    print(header(metadata(command_line(__file__, argv))), flush=True)
    device = torch.device(args.device)
    rows = measure_table(args.n or [3, 5, 7, 9, 11], args.batches, device, args.rounds)
    missed = [row for row in rows if not row["auto_within_10pct"]]
    print(f"auto within 10 % of the fastest backend in {len(rows) - len(missed)} of {len(rows)} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
