"""Exact fits of the linear baselines from second moments of the whole training split.

The low-rank (LR-r) and block-diagonal (BH1) baselines are linear in x, so the mean squared
error of any of them over ALL training rows depends on the rows only through their first and
second moments. With y = W x_o + b the ORIGINAL projection of the original network's input x_o at
the same token, and x the input in the (partly compressed) network, a replacement y ~ A x + c has

    E||y - A x - c||^2 = tr E[y y^T] - 2 tr(A E[x y^T]) + tr(A E[x x^T] A^T)
                         - 2 c.E[y] + 2 c.(A E[x]) + ||c||^2,

where E[x y^T] = E[x x_o^T] W^T + E[x] b^T and E[y y^T] = W E[x_o x_o^T] W^T + W E[x_o] b^T
+ b E[x_o]^T W^T + b b^T. :class:`SecondMoments` accumulates the sums in float64, chunk by
chunk, so the rows never need to be in memory at once; the tests check that this loss equals
the token-wise MSE.

Fits (the covariances C below are the centred moments when the projection has a bias, so the
bias is fitted as c = E[y] - A E[x]; without a bias, the raw moments and c = 0):

- **low rank r: reduced-rank regression** (Izenman 1975, "Reduced-rank regression for the
  multivariate linear model", J. Multivariate Anal. 5; Reinsel & Velu 1998). With
  W_ols = C_yx C_xx^{-1}, the loss of a map M is loss(W_ols) + tr((W_ols - M) C_xx (W_ols - M)^T);
  among rank-r maps it is smallest at M = V_r V_r^T W_ols, V_r the top-r eigenvectors of
  W_ols C_xx W_ols^T (the covariance of the fitted values). Loaded into
  :class:`galinear.nn.LowRankLinear` as up = V_r s^(1/2), down = s^(-1/2) V_r^T W_ols with s the
  row norms of V_r^T W_ols (equal norms for both factors; the product is unchanged).
- **block-diagonal (BH1)**: output block g of :class:`galinear.nn.BlockHadamardLinear` with
  depth 1 reads only input block g (input zero-padded to blocks x block_in, output cut to
  out_features), so the optimum is one least-squares solve per block,
  A_g = C_{y_g x_g} C_{x_g x_g}^{-1}, with the module's own blocking.

- **Hadamard-mixed blocks** (:class:`galinear.nn.MixedBlockHadamardLinear`, y ~ Q D x with Q
  orthogonal): ||y - Q D x|| = ||Q^T y - D x||, so D is the block fit above on the transformed
  targets Q^T y, whose moments are E[x (Q^T y)^T] = E[x y^T] Q: exact.
- **Kronecker sum and Monarch** (:class:`galinear.nn.KroneckerSumLinear`,
  :class:`galinear.nn.MonarchLinear`): the loss is loss(W_ols) + ||(W_ols - M) C_xx^(1/2)||_F^2,
  and neither class has a closed-form minimiser of that weighted norm. The fit is the exact
  Frobenius-nearest member of the class to W_ols (Van Loan-Pitsianis rearrangement + truncated
  SVD; per-sub-block rank-1 SVD for Monarch), which is the optimum of the loss when
  C_xx is a multiple of the identity and otherwise a closed-form initialisation, not the optimum.

When C_xx (or a block of it) is singular or nearly so (smallest eigenvalue <= 1e-10 x the
largest; e.g. fewer rows than features, or a LayerNorm output, which lies in a hyperplane), a
ridge of 1e-8 x the mean eigenvalue is added to it; the ridge used is recorded in the fit stats
(``ridge``; 0 when none was needed).
"""
from __future__ import annotations

import os

import numpy as np

from galinear.optim import loop as optimise

RIDGE_CUTOFF = 1e-10   # smallest / largest eigenvalue below which C_xx counts as singular
RIDGE_SCALE = 1e-8     # the ridge, relative to the mean eigenvalue of C_xx


class SecondMoments:
    """Running sums of x, x_o, x x^T, x x_o^T and x_o x_o^T in float64.

    ``update(x)`` when the input and the original input are the same rows (nothing replaced
    below the layer); ``update(x, x_orig)`` otherwise. Either form throughout one accumulator.
    """

    def __init__(self, d_in: int, d_orig: int | None = None):
        self.d_in = int(d_in)
        self.d_orig = int(d_in if d_orig is None else d_orig)
        self.n = 0
        self.same = None
        self.sx = np.zeros(self.d_in)
        self.sxx = np.zeros((self.d_in, self.d_in))
        self.so = np.zeros(self.d_orig)
        self.sxo = np.zeros((self.d_in, self.d_orig))
        self.soo = np.zeros((self.d_orig, self.d_orig))

    @staticmethod
    def _array(rows, width, what):
        if hasattr(rows, "detach"):
            rows = rows.detach().cpu().double().numpy()
        rows = np.asarray(rows, dtype=np.float64)
        rows = rows.reshape(-1, rows.shape[-1])
        if rows.shape[1] != width:
            raise ValueError(f"{what} rows have width {rows.shape[1]}, the accumulator expects {width}")
        return rows

    def update(self, x, x_orig=None) -> "SecondMoments":
        """Add a chunk of rows (torch tensors or arrays, shape (..., width))."""
        same = x_orig is None
        if self.same is None:
            self.same = same
        elif self.same != same:
            raise ValueError("call update(x) or update(x, x_orig) consistently on one accumulator")
        x = self._array(x, self.d_in, "input")
        self.n += len(x)
        self.sx += x.sum(0)
        self.sxx += x.T @ x
        if not same:
            xo = self._array(x_orig, self.d_orig, "original-input")
            if len(xo) != len(x):
                raise ValueError(f"{len(x)} input rows but {len(xo)} original-input rows")
            self.so += xo.sum(0)
            self.sxo += x.T @ xo
            self.soo += xo.T @ xo
        return self

    # -------------------------------------------------------------- moments
    def _moments(self):
        if self.n == 0:
            raise ValueError("no rows were accumulated")
        n = float(self.n)
        if self.same or self.same is None:
            mx = self.sx / n
            exx = self.sxx / n
            return mx, exx, mx, exx, exx
        return self.sx / n, self.sxx / n, self.so / n, self.sxo / n, self.soo / n

    def regression(self, weight, bias=None) -> "Regression":
        """The moments of (x, y) for targets y = weight @ x_orig + bias."""
        w = _numpy(weight)
        if w.shape[1] != self.d_orig:
            raise ValueError(f"weight has {w.shape[1]} input features, the accumulator {self.d_orig}")
        b = None if bias is None else _numpy(bias).reshape(-1)
        mx, exx, mo, exo, eoo = self._moments()
        exy = exo @ w.T
        my = w @ mo
        eyy = w @ eoo @ w.T
        if b is not None:
            exy = exy + np.outer(mx, b)
            wmo = w @ mo
            eyy = eyy + np.outer(wmo, b) + np.outer(b, wmo) + np.outer(b, b)
            my = my + b
        return Regression(n=self.n, mx=mx, my=my, exx=exx, exy=exy, eyy=eyy, bias=b is not None)

    # -------------------------------------------------------------- storage (no pickle)
    def save(self, path: str) -> None:
        """Write the sums to ``path``, a safetensors state file (:func:`galinear._io.save_state`), atomically."""
        from galinear import _io

        _io.save_state(path, {"n": int(self.n), "same": None if self.same is None else bool(self.same),
                              "sx": self.sx, "sxx": self.sxx, "so": self.so, "sxo": self.sxo, "soo": self.soo})

    @classmethod
    def load(cls, path: str) -> "SecondMoments | None":
        """The sums written by :meth:`save`, or None when ``path`` does not exist.

        A damaged file (truncated, not a state file of these sums) is removed with a message on
        stderr and None is returned, so the caller accumulates the sums again.
        """
        import sys

        from galinear import _io

        state = _io.load_cache(path)
        if state is None:
            return None
        try:
            out = cls(state["sx"].shape[0], state["so"].shape[0])
            out.n, out.same = int(state["n"]), state["same"]
            for name in ("sx", "sxx", "so", "sxo", "soo"):
                value = state[name]
                if not isinstance(value, np.ndarray) or value.dtype != np.float64:
                    raise TypeError(f"{name} is not a float64 array")
                setattr(out, name, np.array(value))
            if out.same not in (None, True, False) or out.sxx.shape != (out.d_in, out.d_in) \
                    or out.sxo.shape != (out.d_in, out.d_orig) or out.soo.shape != (out.d_orig, out.d_orig):
                raise ValueError("the sums' shapes do not agree")
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            print(f"galinear: {path}: damaged ({error}); removing it and recomputing this unit", file=sys.stderr,
                  flush=True)
            try:
                os.remove(path)
            except FileNotFoundError:
                pass
            return None
        return out


class Regression:
    """First and second moments of inputs x (d_in) and targets y (d_out), float64."""

    def __init__(self, n, mx, my, exx, exy, eyy, bias):
        self.n, self.mx, self.my, self.exx, self.exy, self.eyy, self.bias = n, mx, my, exx, exy, eyy, bias

    @property
    def d_out(self) -> int:
        return self.exy.shape[1]

    def covariances(self):
        """(C_xx, C_xy): centred when a bias is fitted, raw otherwise."""
        if self.bias:
            return self.exx - np.outer(self.mx, self.mx), self.exy - np.outer(self.mx, self.my)
        return self.exx, self.exy

    def target_mean_square(self) -> float:
        """E[y_j^2] averaged over the output entries (the MSE of predicting 0)."""
        return float(np.trace(self.eyy) / self.d_out)

    def mse(self, a, c=None) -> float:
        """Mean squared error per entry of y ~ a x + c over the accumulated rows, from the moments."""
        a = _numpy(a)
        total = np.trace(self.eyy) - 2.0 * np.sum(a * self.exy.T) + np.sum((a @ self.exx) * a)
        if c is not None:
            c = _numpy(c).reshape(-1)
            total += -2.0 * c @ self.my + 2.0 * c @ (a @ self.mx) + c @ c
        return float(max(total, 0.0) / self.d_out)

    def intercept(self, a):
        """c = E[y] - a E[x] when a bias is fitted, else None."""
        return self.my - a @ self.mx if self.bias else None


def _numpy(t) -> np.ndarray:
    if hasattr(t, "detach"):
        return t.detach().cpu().double().numpy()
    return np.asarray(t, dtype=np.float64)


def regularised(cxx: np.ndarray):
    """(C_xx + ridge I, ridge): ridge = 0 unless C_xx is singular or nearly so (see module doc)."""
    cxx = 0.5 * (cxx + cxx.T)
    eig = np.linalg.eigvalsh(cxx)
    top = max(float(eig[-1]), 0.0)
    if top == 0.0:
        ridge = 1e-12
    elif eig[0] <= RIDGE_CUTOFF * top:
        ridge = RIDGE_SCALE * max(float(np.mean(np.clip(eig, 0, None))), 1e-300)
    else:
        ridge = 0.0
    return (cxx + ridge * np.eye(len(cxx)) if ridge else cxx), ridge


def least_squares(reg: Regression):
    """The full-matrix optimum W_ols (d_out, d_in) and the ridge used."""
    cxx, cxy = reg.covariances()
    cxx_r, ridge = regularised(cxx)
    return np.linalg.solve(cxx_r, cxy).T, ridge


def reduced_rank(reg: Regression, rank: int):
    """Reduced-rank regression: (up (d_out, r), down (r, d_in), ridge) minimising the MSE at rank r."""
    cxx, _ = reg.covariances()
    w_ols, ridge = least_squares(reg)
    fitted = w_ols @ cxx @ w_ols.T          # covariance of the fitted values W_ols x
    fitted = 0.5 * (fitted + fitted.T)
    vals, vecs = np.linalg.eigh(fitted)
    order = np.argsort(vals)[::-1][:rank]
    v = vecs[:, order]                      # (d_out, r) orthonormal
    down = v.T @ w_ols                      # (r, d_in)
    norms = np.sqrt(np.linalg.norm(down, axis=1))
    norms[norms == 0] = 1.0
    return v * norms, down / norms[:, None], ridge


def block_diagonal(reg: Regression, blocks: int, block_in: int, block_out: int):
    """Per-block least squares with BlockHadamardLinear's blocking: (first (blocks, bo, bi), ridges)."""
    cxx, cxy = reg.covariances()
    d_in, d_out = cxx.shape[0], cxy.shape[1]
    first = np.zeros((blocks, block_out, block_in))
    ridges = []
    for g in range(blocks):
        i0, i1 = g * block_in, min((g + 1) * block_in, d_in)
        o0, o1 = g * block_out, min((g + 1) * block_out, d_out)
        if i1 <= i0 or o1 <= o0:
            continue  # a block that sees only padding (inputs) or feeds only cut outputs
        sub, ridge = regularised(cxx[i0:i1, i0:i1])
        ridges.append(ridge)
        first[g, :o1 - o0, :i1 - i0] = np.linalg.solve(sub, cxy[i0:i1, o0:o1]).T
    return first, ridges


def dense_of_blocks(first: np.ndarray, d_in: int, d_out: int) -> np.ndarray:
    """The (d_out, d_in) block-diagonal matrix of ``first`` (padding cut)."""
    blocks, bo, bi = first.shape
    a = np.zeros((blocks * bo, blocks * bi))
    for g in range(blocks):
        a[g * bo:(g + 1) * bo, g * bi:(g + 1) * bi] = first[g]
    return a[:d_out, :d_in]


def fit_on_moments(module, reg: Regression, *, lr: float = 0.05, max_steps: int = 500, eval_every: int = 10,
                   patience: int = 5, min_delta: float = 1e-4, decay: float = 0.3, decays: int = 1) -> dict:
    """Fit a linear module with parameters (e.g. ``RotorLinear``) by Adam on the exact MSE over all rows.

    The loss of every step is :meth:`Regression.mse` of the module's matrix (``dense_weight()``)
    and bias: the mean squared error over all accumulated rows, whatever their number, with no
    mini-batch noise. Every ``eval_every`` steps the loss is compared with the best so far; after
    ``patience`` checks without a relative gain of ``min_delta`` the rate is multiplied by
    ``decay`` (``decays`` times), then the fit stops (or at ``max_steps``); the best parameters
    are kept (the loop and the rule of :func:`galinear.optim.loop.train`, its check the loss
    itself, evaluated again). Returns stats with ``train_mse``, ``steps``, ``best_step``, ``stopped`` and
    ``moment_curve`` ([step, training MSE]).
    """
    import torch

    if (getattr(module, "bias", None) is not None) != reg.bias:
        raise ValueError("the module's bias must follow the original projection's (fit a bias iff it has one)")
    exx, exy, mx, my = (torch.as_tensor(v) for v in (reg.exx, reg.exy, reg.mx, reg.my))
    trace = float(np.trace(reg.eyy))

    def loss():
        a = module.dense_weight().double()
        total = trace - 2.0 * (a * exy.T).sum() + ((a @ exx) * a).sum()
        if reg.bias:
            c = module.bias.double()
            total = total - 2.0 * c @ my + 2.0 * c @ (a @ mx) + c @ c
        return total / reg.d_out

    what = f"while fitting {type(module).__name__} on second moments; lower the learning rate"

    def validate():  # the loss at a check: the same forward as a step's (with gradients), so the same floats
        value = loss()
        if not torch.isfinite(value.detach()):
            raise FloatingPointError(f"non-finite loss at a check {what}")
        return float(value.detach())

    module.eval()  # dense_weight does not refresh warm starts; eval keeps every forward pure
    optimizer = optimise.make_optimizer("adam", [p for p in module.parameters() if p.requires_grad], lr)
    run = optimise.train(optimizer, lambda step: loss(), steps=max_steps, modules={"module": module}, train_mode=False,
                         validate=validate, eval_every=eval_every,
                         plateau=optimise.Plateau(patience, min_delta, decay, decays),
                         nonfinite=f"non-finite loss at step {{step}} {what}")
    return {"train_mse": run.plateau.best, "steps": int(run.step), "best_step": int(run.plateau.best_step),
            "stopped": run.stopped, "moment_curve": run.curve, "ridge": 0.0, "rows": int(reg.n)}


def fit_module(module, reg: Regression) -> dict:
    """Set ``module`` (LowRankLinear, BlockHadamardLinear with depth 1, or a structured module) to its fit.

    Returns stats: ``train_mse`` (from the moments, over all training rows), ``ridge``, ``rows``.
    """
    import torch

    from galinear.nn import BlockHadamardLinear, LowRankLinear

    if (module.bias is not None) != reg.bias:
        raise ValueError("the module's bias must follow the original projection's (fit a bias iff it has one)")
    if type(module).__name__ == "RotorLinear":
        return fit_on_moments(module, reg)
    if isinstance(module, LowRankLinear):
        up, down, ridge = reduced_rank(reg, module.rank)
        a = up @ down
        params = {"up": up, "down": down}
    elif isinstance(module, BlockHadamardLinear):
        if module.depth != 1:
            raise ValueError(f"only depth-1 BlockHadamardLinear (BH1) has a closed-form fit, got depth {module.depth}")
        first, ridges = block_diagonal(reg, module.blocks, module.block_in, module.block_out)
        ridge = max(ridges) if ridges else 0.0
        a = dense_of_blocks(first, module.in_features, module.out_features)
        params = {"first": first}
    elif type(module).__name__ in _STRUCTURED:
        a, params, ridge = _structured_fit(module, reg)
    else:
        raise TypeError(f"no closed-form fit for {type(module).__name__}; use one of LowRankLinear, "
                        f"BlockHadamardLinear, {', '.join(_STRUCTURED)}")
    c = reg.intercept(a)
    if c is not None:
        params["bias"] = c
    with torch.no_grad():
        for name, value in params.items():
            target = getattr(module, name)
            target.copy_(torch.as_tensor(value, dtype=target.dtype).reshape(target.shape))
    # the loss of the module as loaded (float32 parameters), from the moments
    return {"train_mse": reg.mse(module_matrix(module), c if c is None else _numpy(module.bias)),
            "ridge": float(ridge), "rows": int(reg.n), "steps": 0}


_STRUCTURED = ("KroneckerSumLinear", "MonarchLinear", "MixedBlockHadamardLinear")


def mixed_block_fit(reg: Regression, mixing: np.ndarray, blocks: int, block_in: int, block_out: int):
    """Blocks D of y ~ Q D x (Q = ``mixing``, orthogonal): the block fit to the targets Q^T y; (first, ridges)."""
    turned = Regression(n=reg.n, mx=reg.mx, my=mixing.T @ reg.my, exx=reg.exx, exy=reg.exy @ mixing,
                        eyy=mixing.T @ reg.eyy @ mixing, bias=reg.bias)
    return block_diagonal(turned, blocks, block_in, block_out)


def _structured_fit(module, reg: Regression):
    """(matrix, parameters, ridge) of the closed-form fit of a galinear.nn.structured module."""
    import torch

    from galinear.nn import structured

    if isinstance(module, structured.MixedBlockHadamardLinear):
        q = _numpy(module.mixing_matrix(dtype=torch.float64))
        first, ridges = mixed_block_fit(reg, q, module.blocks, module.block_in, module.block_out)
        a = q @ dense_of_blocks(first, module.in_features, module.out_features)
        return a, {"first": first}, max(ridges) if ridges else 0.0
    w_ols, ridge = least_squares(reg)
    w = torch.as_tensor(w_ols)
    if isinstance(module, structured.KroneckerSumLinear):
        left, right, _ = structured.nearest_kronecker_sum(w, module.terms, module.factors)
        a = sum(np.kron(x, y) for x, y in zip(left.numpy(), right.numpy()))
    else:
        left, right = structured.monarch_projection(w, module.blocks)
        a = np.einsum("ahg,gat->hagt", left.numpy(), right.numpy()).reshape(module.out_features, module.in_features)
    return a, {"left": left.numpy(), "right": right.numpy()}, ridge


def module_matrix(module) -> np.ndarray:
    """The (d_out, d_in) matrix of a linear replacement (bias excluded), float64."""
    import torch

    with torch.no_grad():
        if hasattr(module, "dense_weight"):
            return _numpy(module.dense_weight())
        if isinstance(module, torch.nn.Linear):
            return _numpy(module.weight)
    raise TypeError(f"{type(module).__name__} is not a linear replacement")


def module_mse(module, reg: Regression) -> float:
    """MSE per entry of a linear replacement over the rows behind ``reg`` (from the moments)."""
    bias = getattr(module, "bias", None)
    return reg.mse(module_matrix(module), None if bias is None else _numpy(bias))


__all__ = ["SecondMoments", "Regression", "regularised", "least_squares", "reduced_rank", "block_diagonal",
           "dense_of_blocks", "mixed_block_fit", "fit_module", "fit_on_moments", "module_matrix", "module_mse"]
