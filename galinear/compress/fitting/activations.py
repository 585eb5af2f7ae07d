"""Activation capture: what one decoder layer's projections read.

``capture`` runs windows through the model and returns, for one decoder layer, the attention
input (the output of the layer's input norm, i.e. what q_proj / k_proj / v_proj read), the input
of o_proj, of the MLP (what gate_proj / up_proj read) or of down_proj. The forward pass is stopped
right after the captured point, so layers above it cost nothing. Captures in a network with
replaced projections run inside :func:`galinear.compress.fitting.surgery.swapped`.

``capture_to_shards`` runs the same forward passes but writes the rows to disk in safetensors
shards of a few windows each, so at most one shard of activations is held in memory, and
returns a :class:`CaptureShards`: it reads back the rows of an index tensor (``shards[idx]``)
batch by batch and can be passed to :func:`galinear.compress.fitting.projection.fit_projection` and
:func:`galinear.compress.fitting.converge.fit_until_converged` in place of the tensor ``capture``
returns; the fits then see the same rows in the same order and give the same results, bit for
bit.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

from galinear import _io
from galinear._progress import progress_steps
from galinear.lm.models import attention, attention_norm, decoder_layers, mlp, starting_at


class _Stop(Exception):
    """Raised by a capture hook to end the forward pass once the wanted tensor is recorded."""


def _captured_batches(model, layer: int, token_windows: np.ndarray, where: str, progress: str | None,
                      batch_size: int, residuals=None):
    """Yield the (batch windows * length, width) activations of ``capture``, one forward batch at a
    time; with ``residuals`` (windows, length, width), the residual-stream inputs of ``layer``, only
    layers ``layer..`` run (:func:`starting_at`)."""
    import torch

    block = decoder_layers(model)[layer]
    if where == "attn_in":
        target = attention_norm(block)
    elif where == "o_in":
        target = attention(block).o_proj
    elif where == "mlp_in":
        target = mlp(block)
    elif where == "down_in":
        target = mlp(block).down_proj
    else:
        raise ValueError(f"where must be 'attn_in', 'o_in', 'mlp_in' or 'down_in', got {where!r}")
    store = []

    def forward_hook(module, args, output):
        store.append(output.detach().reshape(-1, output.shape[-1]).clone())
        raise _Stop

    def pre_hook(module, args):
        store.append(args[0].detach().reshape(-1, args[0].shape[-1]).clone())
        raise _Stop

    handle = (target.register_forward_hook(forward_hook) if where == "attn_in"
              else target.register_forward_pre_hook(pre_hook))
    try:
        starts = range(0, len(token_windows), batch_size)
        bar = progress_steps(len(starts), progress)
        for n, i in enumerate(starts, 1):
            with torch.no_grad(), (starting_at(model, layer) if residuals is not None else contextlib.nullcontext()):
                inputs = ({"input_ids": torch.as_tensor(token_windows[i:i + batch_size])} if residuals is None
                          else {"inputs_embeds": residuals[i:i + batch_size]})
                try:
                    model(**inputs, use_cache=False)
                except _Stop:
                    pass
                else:
                    raise RuntimeError(f"layer {layer}'s {where} was never reached in the forward pass")
            bar.step(n)
            yield store.pop()
        bar.close(f"{len(token_windows)} windows captured")
    finally:
        handle.remove()


def capture(model, layer: int, token_windows: np.ndarray, where: str = "attn_in",
            progress: str | None = None, batch_size: int = 1, residuals=None):
    """Activations at ``layer`` for every token of every window, as a (windows*length, width) tensor.

    Parameters
    ----------
    where : {"attn_in", "o_in", "mlp_in", "down_in"}
        ``attn_in``: output of the layer's input norm (the q/k/v input). ``o_in``: input of o_proj
        (the concatenated per-head attention outputs). ``mlp_in``: input of the MLP (what gate_proj
        and up_proj read). ``down_in``: input of down_proj (the gated activations).
    residuals : tensor (windows, length, width), optional
        The residual-stream inputs of ``layer`` for these windows (:func:`residual_inputs`): only
        layers ``layer..`` run. Valid when nothing below ``layer`` differs from the network that
        produced them and :func:`skip_is_exact` holds for the model.
    progress : str, optional
        Label of the progress display (:class:`galinear._progress.Progress`: a bar on a
        terminal, one line per capture in a log); None for none.
    """
    import torch

    return torch.cat(list(_captured_batches(model, layer, token_windows, where, progress, batch_size, residuals)),
                     dim=0)


def capture_to_shards(model, layer: int, token_windows: np.ndarray, folder: str, where: str = "attn_in",
                      progress: str | None = None, batch_size: int = 1, shard_windows: int = 4) -> "CaptureShards":
    """:func:`capture`, written to ``folder`` in shards of ``shard_windows`` windows instead of returned whole.

    The rows are those of :func:`capture` with the same arguments, in the same order, bit for bit.
    At most one shard (plus one forward batch) of activations is in memory. The folder is written
    atomically (:func:`galinear._io.atomic_folder`; each shard through :func:`galinear._io.atomic_write`),
    so an interrupted capture leaves no folder. Returns the :class:`CaptureShards` reading it.
    """
    if isinstance(shard_windows, bool) or not isinstance(shard_windows, int) or shard_windows < 1:
        raise ValueError(f"shard_windows must be a positive integer (windows per shard), got {shard_windows!r}")
    rows_per_shard = shard_windows * int(np.shape(token_windows)[1])

    def shards():
        pending, held = [], 0
        for rows in _captured_batches(model, layer, token_windows, where, progress, batch_size):
            pending.append(rows)
            held += len(rows)
            while held >= rows_per_shard:
                yield from _take(pending, rows_per_shard)
                held -= rows_per_shard
        if held:
            yield from _take(pending, held)

    return write_shards(folder, shards())


def _take(pending: list, count: int):
    """Yield the first ``count`` rows of the tensors in ``pending`` as one tensor; keep the rest there."""
    import torch

    out, need = [], count
    while need:
        head = pending[0]
        if len(head) <= need:
            out.append(pending.pop(0))
            need -= len(head)
        else:
            out.append(head[:need])
            pending[0] = head[need:]
            need = 0
    yield torch.cat(out, dim=0) if len(out) > 1 else out[0]


_SHARDS_FORMAT = "galinear-capture-shards-v1"
_SHARDS_INDEX = "capture.json"


def write_shards(folder: str, chunks) -> "CaptureShards":
    """Write the 2-D tensors of the iterable ``chunks`` (one shard each, in order) to ``folder``.

    The rows of the result are the rows of the chunks concatenated. One chunk is held at a time.
    """
    from safetensors.torch import save_file

    counts, width, dtype = [], None, None
    with _io.atomic_folder(folder) as tmp:
        for k, chunk in enumerate(chunks):
            if chunk.ndim != 2 or (width is not None and (chunk.shape[1] != width or chunk.dtype != dtype)):
                raise ValueError(f"shard {k} has shape {tuple(chunk.shape)} and dtype {chunk.dtype}; every shard "
                                 f"must be 2-D with the first one's width and dtype ({width}, {dtype})")
            width, dtype = int(chunk.shape[1]), chunk.dtype
            data = chunk.detach().cpu().contiguous()
            _io.atomic_write(os.path.join(tmp, f"shard-{k:05d}.safetensors"),
                             lambda path, data=data: save_file({"rows": data}, path))
            counts.append(int(len(chunk)))
        if not counts:
            raise ValueError("nothing to write: a capture needs at least one window")
        _io.save_json(os.path.join(tmp, _SHARDS_INDEX), {"format": _SHARDS_FORMAT, "rows": counts, "width": width,
                                                         "dtype": str(dtype).replace("torch.", "")})
    return CaptureShards(folder)


class CaptureShards:
    """Rows of a capture stored in safetensors shards (:func:`capture_to_shards`), read on demand.

    ``len(shards)``, ``shards.shape`` and ``shards[index]`` behave like the (rows, width) tensor
    :func:`capture` returns, for the indexing the fits use: a 1-D integer tensor (or list) of row
    numbers, an int, or a slice with step 1. Only the requested rows are read (safetensors'
    ``safe_open`` slices, runs of consecutive rows read at once), so the memory a read needs is
    that of its result. ``view(start, stop)`` is the rows ``start:stop`` as another CaptureShards
    (a training / test split of one capture); ``to_tensor()`` reads everything.
    """

    def __init__(self, folder: str, start: int = 0, stop: int | None = None):
        import torch

        self.folder = os.fspath(folder)
        path = os.path.join(self.folder, _SHARDS_INDEX)
        fix = "delete the folder and capture again"
        if not os.path.exists(path):
            raise _io.CorruptFileError(path, "missing: not a capture written by capture_to_shards", fix)
        index = _io.load_json(path, fix=fix)
        if not isinstance(index, dict) or index.get("format") != _SHARDS_FORMAT:
            raise _io.CorruptFileError(path, f"format {index.get('format') if isinstance(index, dict) else None!r}, "
                                       f"expected {_SHARDS_FORMAT!r}", fix)
        self._counts = [int(c) for c in index["rows"]]
        self._bounds = np.concatenate([[0], np.cumsum(self._counts)]).astype(np.int64)
        self.width, self.dtype = int(index["width"]), getattr(torch, index["dtype"])
        total = int(self._bounds[-1])
        stop = total if stop is None else stop
        if not 0 <= start <= stop <= total:
            raise ValueError(f"rows {start}:{stop} are not inside the capture's {total} rows")
        self._start, self._stop = int(start), int(stop)
        self._handles = {}
        self._last = (None, None, None)

    # ---------------------------------------------------------------- tensor-like
    def __len__(self) -> int:
        return self._stop - self._start

    @property
    def shape(self) -> tuple:
        return (len(self), self.width)

    def view(self, start: int, stop: int) -> "CaptureShards":
        """Rows ``start:stop`` of this capture (no data read)."""
        return CaptureShards(self.folder, self._start + start, self._start + stop)

    def to_tensor(self):
        """All rows as one tensor (what :func:`capture` returns)."""
        return self[0:len(self)]

    def __getitem__(self, key):
        import torch

        n = len(self)
        if isinstance(key, slice):
            start, stop, step = key.indices(n)
            if step != 1:
                raise IndexError("CaptureShards slices take step 1")
            return self._read(np.arange(start, max(start, stop), dtype=np.int64))
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
            if not -n <= key < n:
                raise IndexError(f"row {key} is out of range for {n} rows")
            return self._read(np.array([key % n], dtype=np.int64))[0]
        if isinstance(key, torch.Tensor) and key is self._last[0] and key._version == self._last[1]:
            return self._last[2]  # the inputs and targets of one batch are often one capture
        rows = torch.as_tensor(key)
        if rows.dtype == torch.bool or rows.is_floating_point() or rows.ndim != 1:
            raise IndexError("index a CaptureShards with a 1-D integer tensor of row numbers, an int or a slice")
        idx = rows.cpu().numpy().astype(np.int64)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"row numbers must lie in [-{n}, {n}), got {idx.min()}..{idx.max()}")
        out = self._read(np.where(idx < 0, idx + n, idx))
        if isinstance(key, torch.Tensor):
            self._last = (key, key._version, out.clone())
        return out

    # ---------------------------------------------------------------- reading
    def _slice(self, shard: int):
        if shard not in self._handles:
            from safetensors import safe_open

            path = os.path.join(self.folder, f"shard-{shard:05d}.safetensors")
            try:
                handle = safe_open(path, framework="pt")
                part = handle.get_slice("rows")
            except Exception as error:  # missing or damaged file (safetensors raises its own types)
                raise _io.CorruptFileError(path, f"not a readable capture shard ({error})",
                                           "delete the capture folder and capture again") from None
            if list(part.get_shape()) != [self._counts[shard], self.width]:
                raise _io.CorruptFileError(path, f"shape {part.get_shape()} differs from the index",
                                           "delete the capture folder and capture again")
            self._handles[shard] = (handle, part)
        return self._handles[shard][1]

    def _read(self, rows: np.ndarray):
        """Rows ``rows`` (numbers within this view, each in range) as one (len(rows), width) tensor."""
        import torch

        out = torch.empty((len(rows), self.width), dtype=self.dtype)
        if not len(rows):
            return out
        absolute = rows + self._start
        order = np.argsort(absolute, kind="stable")
        wanted = absolute[order]
        shard_of = np.searchsorted(self._bounds, wanted, side="right") - 1
        # runs of consecutive (or repeated) rows inside one shard are read with one slice
        cut = np.flatnonzero((np.diff(wanted) > 1) | (np.diff(shard_of) != 0)) + 1
        for first, last in zip(np.concatenate([[0], cut]), np.concatenate([cut, [len(wanted)]])):
            shard = int(shard_of[first])
            lo, hi = int(wanted[first] - self._bounds[shard]), int(wanted[last - 1] - self._bounds[shard]) + 1
            block = self._slice(shard)[lo:hi]
            out[torch.as_tensor(order[first:last])] = block[torch.as_tensor(wanted[first:last] - wanted[first])]
        return out

    def __repr__(self) -> str:
        return f"CaptureShards({self.folder!r}, rows={len(self)}, width={self.width}, shards={len(self._counts)})"


def residual_inputs(model, layer: int, token_windows: np.ndarray, progress: str | None = None):
    """Residual-stream input of decoder layer ``layer`` for each window: (windows, length, width)."""
    import torch

    block = decoder_layers(model)[layer]
    store = []

    def pre_hook(module, args, kwargs):
        hidden = args[0] if args else kwargs["hidden_states"]
        store.append(hidden.detach().clone())
        raise _Stop

    handle = block.register_forward_pre_hook(pre_hook, with_kwargs=True)
    try:
        with torch.no_grad():
            bar = progress_steps(len(token_windows), progress)
            for i in range(len(token_windows)):
                try:
                    model(input_ids=torch.as_tensor(token_windows[i:i + 1]), use_cache=False)
                except _Stop:
                    pass
                bar.step(i + 1)
            bar.close(f"{len(token_windows)} windows")
    finally:
        handle.remove()
    return torch.cat(store, dim=0)


def skip_is_exact(model, token_window: np.ndarray, layer: int, atol: float = 1e-4) -> bool:
    """True when running from layer ``layer`` with the captured residual reproduces the full logits."""
    import torch

    try:
        with torch.no_grad():
            full = model(input_ids=torch.as_tensor(token_window[None]), use_cache=False).logits
            hidden = residual_inputs(model, layer, token_window[None])
            with starting_at(model, layer):
                part = model(inputs_embeds=hidden, use_cache=False).logits
        return bool(torch.allclose(full, part, atol=atol, rtol=1e-4))
    except Exception:  # any family-specific failure means: do not skip
        return False
