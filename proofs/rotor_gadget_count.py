"""Parameter count of the rotor gadget (paper Eq. 6) and of the paper's q/k/v networks.

  (1) the closed form P C(n,2) (2 if double else 1) + P [alpha] + d_out [bias], P = I J,
      c = 2^n = min(2^floor(log2 d_in), 2^floor(log2 d_out)), I = ceil(d_in/c), J = ceil(d_out/c)
      equals an explicit construction that lists every chunk pair with its bivector(s) and alpha,
      for every d_in, d_out in 1..2^n_max (and checks that the wrapped windows cover every
      coordinate); as a symbolic identity in P and n, the parameter list lengths add up;
  (2) the network of paper-notes section 5 (H = 2048, 2 hidden layers of breadth 3, double
      rotors, alpha on, no bias, one shared PReLU) has 895 / 1,076 parameters for LLaMA-3.2-1B
      q / k = v and 1,401 / 1,493 for Qwen-2.5-1.5B; per layer 3,047 and 4,387, against 6,291,456
      and 3,147,776 dense parameters (Qwen's q/k/v carry biases).
"""
import math

import sympy as sp

from galinear.symbolic.closed_forms import (
    gadget_chunks,
    rotor_gadget_parameter_count,
    rotor_network_parameter_count,
)
from galinear.symbolic.proving import run_proof

IDENTITY = "rotor gadget parameter count (895 / 1,076 / 1,401 / 1,493)"
N_MIN = 1
N_DEFAULT = 6


def constructed_count(d_in, d_out, double, alpha, bias):
    """Build the gadget's parameter list chunk pair by chunk pair and count it."""
    c, I, J = gadget_chunks(d_in, d_out)
    n = c.bit_length() - 1
    starts_in = [i * d_in // I for i in range(I)]
    starts_out = [j * d_out // J for j in range(J)]
    covered_in = {(s + t) % d_in for s in starts_in for t in range(c)}
    covered_out = {(s + t) % d_out for s in starts_out for t in range(c)}
    if covered_in != set(range(d_in)) or covered_out != set(range(d_out)):
        raise AssertionError(f"chunks do not cover ({d_in}, {d_out})")
    params = []
    for i in range(I):
        for j in range(J):
            for side in range(2 if double else 1):
                params.extend(("bivector", i, j, side, p) for p in range(math.comb(n, 2)))
            if alpha:
                params.append(("alpha", i, j))
    if bias:
        params.extend(("bias", t) for t in range(d_out))
    return len(params)


def prove(n_max, log):
    P, n = sp.symbols("P n", positive=True, integer=True)
    per_pair = sp.binomial(n, 2) * 2 + 1
    log.check("closed form: P (2 C(n,2) + 1) = 2 P C(n,2) + P", P * per_pair - (2 * P * sp.binomial(n, 2) + P), sp.expand)
    top = 1 << n_max
    ok = True
    for d_in in range(1, top + 1):
        for d_out in range(1, top + 1):
            for double, alpha, bias in ((True, True, False), (False, True, False), (True, False, True)):
                ok &= rotor_gadget_parameter_count(d_in, d_out, double=double, alpha=alpha, bias=bias) == constructed_count(
                    d_in, d_out, double, alpha, bias
                )
    log.record(f"closed form = explicit construction for all d_in, d_out <= 2^{n_max} (3 option sets)", ok)
    table = {
        "LLaMA-3.2-1B q (2048 -> 2048)": (rotor_network_parameter_count(2048, 2048), 895),
        "LLaMA-3.2-1B k = v (2048 -> 512)": (rotor_network_parameter_count(2048, 512), 1076),
        "Qwen-2.5-1.5B q (1536 -> 1536)": (rotor_network_parameter_count(1536, 1536), 1401),
        "Qwen-2.5-1.5B k = v (1536 -> 256)": (rotor_network_parameter_count(1536, 256), 1493),
    }
    for name, (got, want) in table.items():
        log.record(f"{name}: {got:,} parameters (paper: {want:,})", got == want)
    llama = table["LLaMA-3.2-1B q (2048 -> 2048)"][0] + 2 * table["LLaMA-3.2-1B k = v (2048 -> 512)"][0]
    qwen = table["Qwen-2.5-1.5B q (1536 -> 1536)"][0] + 2 * table["Qwen-2.5-1.5B k = v (1536 -> 256)"][0]
    log.record(f"per layer q+k+v: LLaMA {llama:,} (paper 3,047), Qwen {qwen:,} (paper 4,387)", (llama, qwen) == (3047, 4387))
    dense_llama = 2048 * 2048 + 2 * 2048 * 512
    dense_qwen = 1536 * 1536 + 2 * 1536 * 256 + (1536 + 256 + 256)
    log.record(
        f"dense q+k+v: LLaMA {dense_llama:,} (paper 6,291,456), Qwen {dense_qwen:,} with biases (paper 3,147,776)",
        (dense_llama, dense_qwen) == (6291456, 3147776),
    )


if __name__ == "__main__":
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
