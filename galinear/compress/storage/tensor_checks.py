"""Tensors checked against their role before a module takes them.

Shared by the kept folders of :mod:`galinear.compress.storage.folder_format` and the fit cache of
:mod:`galinear.compress.storage.store`: every tensor is compared with the module's own state_dict (names,
dtypes, shapes), with what was recorded beside it (shape, dtype, SHA-256 of the bytes as stored),
and for finite values; the modules' load hooks then check what only they know (permutations that
are permutations). Integer buffers may be stored narrower than the module holds them
(:func:`narrowest`) and are widened back here.
"""
from __future__ import annotations

import hashlib


def tensor_sha256(tensor) -> str:
    """SHA-256 of a tensor's bytes as stored (dtype and shape are recorded beside it)."""
    import torch

    data = tensor.detach().cpu().contiguous().reshape(-1)
    return hashlib.sha256(data.view(torch.uint8).numpy().tobytes()).hexdigest()


def describe_tensors(state: dict) -> dict:
    """{name: {"shape", "dtype", "sha256"}} of a module's state_dict, as a folder records it."""
    return {k: {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", ""), "sha256": tensor_sha256(v)}
            for k, v in state.items()}


def narrowest(tensor):
    """An int64 tensor as the narrowest of int16 and int32 that holds its values; others as they are."""
    import torch

    if tensor.dtype != torch.int64 or not tensor.numel():
        return tensor
    low, high = int(tensor.min()), int(tensor.max())
    for dtype in (torch.int16, torch.int32):
        info = torch.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return tensor.to(dtype)
    return tensor


def widened(stored, expected):
    """A stored int16/int32 tensor as the int64 its module holds (see :func:`narrowest`)."""
    import torch

    narrow = (torch.int16, torch.int32)
    if isinstance(stored, torch.Tensor) and stored.dtype in narrow and expected.dtype == torch.int64:
        return stored.to(torch.int64)
    return stored


def _without_unread_warm_starts(where: str, own: dict, state: dict, declared: dict | None, fix: str):
    """``state`` and ``declared`` without the power method's warm-start vectors where ``module`` has
    none: folders written before exact-decomposition layers stopped holding them carry such
    vectors, which an exact layer never reads. Each dropped one is still checked against its
    recorded SHA-256, so a changed file is refused as before."""
    from galinear.nn.rotor import WARM_START_BUFFERS

    unread = [k for k in state if k not in own and k.rpartition(".")[2] in WARM_START_BUFFERS]
    if not unread:
        return state, declared
    if declared is not None:
        for name in unread:
            if name in declared and tensor_sha256(state[name]) != declared[name]["sha256"]:
                raise ValueError(f"{where}: tensor {name} does not match its recorded SHA-256 (changed after it "
                                 f"was saved, or swapped with another); {fix}")
        declared = {k: v for k, v in declared.items() if k not in unread}
    return {k: v for k, v in state.items() if k not in unread}, declared


def checked_module(where: str, module, state: dict, declared: dict | None = None, *, fix: str):
    """``module`` with ``state`` loaded, after every tensor was checked against its role: the names,
    dtypes and shapes of the module's own state_dict, finite floating-point values, the recorded
    shape, dtype and SHA-256 (``declared``, from :func:`describe_tensors`) and, through the
    module's load hooks, permutation buffers that are permutations. ``where`` starts every message
    and ``fix`` (how to write the file again) ends it."""
    import torch

    own = module.state_dict()
    state, declared = _without_unread_warm_starts(where, own, state, declared, fix)
    missing, extra = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or extra:
        raise ValueError(f"{where}: the tensors differ from a {type(module).__name__}'s (missing {missing}, "
                         f"unexpected {extra}); {fix}")
    if declared is not None and set(declared) != set(own):
        raise ValueError(f"{where}: the recorded tensors {sorted(declared)} differ from a {type(module).__name__}'s "
                         f"{sorted(own)}; {fix}")
    state = dict(state)
    for name, expected in own.items():
        stored = state[name]  # as in the file: the shape, dtype and SHA-256 recorded are of it
        value = state[name] = widened(stored, expected)
        if not isinstance(value, torch.Tensor) or value.dtype != expected.dtype or value.shape != expected.shape:
            got = f"{stored.dtype} {tuple(stored.shape)}" if isinstance(stored, torch.Tensor) else type(stored).__name__
            raise ValueError(f"{where}: tensor {name} is {got}, a {type(module).__name__} holds "
                             f"{expected.dtype} {tuple(expected.shape)} there; {fix}")
        if declared is not None:
            info = declared[name]
            if info["shape"] != list(stored.shape) or info["dtype"] != str(stored.dtype).replace("torch.", ""):
                raise ValueError(f"{where}: tensor {name} is {stored.dtype} {tuple(stored.shape)}, recorded as "
                                 f"{info['dtype']} {tuple(info['shape'])}; {fix}")
            if tensor_sha256(stored) != info["sha256"]:
                raise ValueError(f"{where}: tensor {name} does not match its recorded SHA-256 (changed after it "
                                 f"was saved, or swapped with another); {fix}")
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            raise ValueError(f"{where}: tensor {name} holds NaN or infinity; {fix}")
    try:
        module.load_state_dict(state, strict=True)
    except (ValueError, RuntimeError) as error:
        raise ValueError(f"{where}: {error}; {fix}") from None
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


__all__ = ["tensor_sha256", "describe_tensors", "narrowest", "widened", "checked_module"]
