"""Policies saved as files: TorchScript (``torch.jit.save``) or ``torch.export`` archives.

Both are zip archives; which one a file is comes from its members, not its suffix. A
``torch.save`` checkpoint (a pickle) is refused, and so is any ``torch.export`` archive
that ``torch.export.load`` would unpickle or execute native code from: pickled weights
or constants, custom or opaque objects, AOTInductor libraries, legacy-format members, or
sample inputs that ``torch.load(weights_only=True)`` cannot read (torch then falls back
to a full unpickle). Every member of an export archive must be one we know to be data.
"""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from expcli.errors import ConfigError, FormatError
from expcli.named_callables import file_sha256

__all__ = ["file_sha256", "load_torch_policy"]

_SAVE_HINT = (
    "save the policy with torch.jit.script(model).save(FILE) or "
    "torch.export.save(torch.export.export(model, (example,)), FILE)"
)


def load_torch_policy(
    spec: str, action_space: Any, num_envs: int
) -> tuple[Callable[[Any], Any], dict[str, Any]]:
    """Load a TorchScript or ``torch.export`` file as a callable of observation batches.

    Returns the callable and its description (kind, spec, file, sha256, logits_argmax).

    Raises:
        ConfigError: The file does not exist.
        FormatError: Not a zip archive, a pickled checkpoint, an unsafe or corrupt archive.
    """
    path = Path(spec)
    if not path.is_file():
        raise ConfigError(f"policy file {spec!r} not found")
    kind = _archive_kind(path)
    import torch

    try:
        if kind == "torchscript":
            # torch 2.13 deprecates TorchScript in favour of torch.export; the files users
            # have are still TorchScript, so loading one is not worth a warning each run.
            with warnings.catch_warnings():
                warnings.filterwarnings(
                    "ignore", "`torch.jit.load` is deprecated", DeprecationWarning
                )
                module = torch.jit.load(str(path), map_location="cpu")  # type: ignore[no-untyped-call]
            module.eval()
        else:
            with open(path, "rb") as f:  # a file object: no warning about the suffix
                module = torch.export.load(f).module()
    except Exception as e:
        raise FormatError(f"cannot load this {kind} file: {e}", path=path) from e
    argmax_n = int(action_space.n) if type(action_space).__name__ == "Discrete" else None
    start = int(action_space.start) if argmax_n is not None else 0
    description = {
        "kind": kind,
        "spec": spec,
        "file": str(path.resolve()),
        "sha256": file_sha256(path),
        "logits_argmax": argmax_n is not None,
    }
    return _TorchRunner(module, spec, num_envs, argmax_n, start), description


class _TorchRunner:
    """Runs a torch module under ``no_grad`` on a float32 batch; actions as numpy.

    For a Discrete(n) space an ``(N, n)`` floating output is logits: the action is
    ``start + argmax``.
    """

    def __init__(
        self, module: Any, spec: str, num_envs: int, argmax_n: int | None, start: int
    ) -> None:
        import torch

        self.module = module
        self.spec = spec
        self._torch = torch
        self._logits_shape = (num_envs, argmax_n) if argmax_n is not None else None
        self._start = start

    def __call__(self, observations: Any) -> np.ndarray:
        torch = self._torch
        batch = _to_tensor(torch, observations)
        with torch.no_grad():
            try:
                out = self.module(batch)
            except Exception as e:
                raise ConfigError(
                    f"policy {self.spec!r} failed on a float32 batch of observations "
                    f"{_shapes(batch)}: {type(e).__name__}: {e}"
                ) from e
        if not isinstance(out, torch.Tensor):
            raise ConfigError(
                f"policy {self.spec!r} returned {type(out).__name__}; expected one tensor "
                "of actions (return only the actions from forward)"
            )
        if out.is_floating_point() and tuple(out.shape) == self._logits_shape:
            out = out.argmax(dim=-1)
            if self._start:
                out = out + self._start
        return out.detach().cpu().numpy()  # type: ignore[no-any-return]


def _to_tensor(torch: Any, observations: Any) -> Any:
    """float32 tensors of a batch: an array, a dict of arrays, or a sequence of per-env items."""
    if isinstance(observations, dict):
        return {k: _to_tensor(torch, v) for k, v in observations.items()}
    if isinstance(observations, torch.Tensor):
        return observations.to(torch.float32)
    if isinstance(observations, np.ndarray) and observations.dtype != object:
        array = observations
    else:
        items = list(observations)
        if items and isinstance(items[0], dict):
            return {k: _to_tensor(torch, np.stack([o[k] for o in items])) for k in items[0]}
        array = np.stack([np.asarray(o) for o in items])
    array = np.ascontiguousarray(array, dtype=np.float32)
    if not array.flags.writeable:  # torch warns on read-only arrays (shared memory views)
        array = array.copy()
    return torch.from_numpy(array)


def _shapes(batch: Any) -> str:
    if isinstance(batch, dict):
        return "{" + ", ".join(f"{k}: {tuple(v.shape)}" for k, v in batch.items()) + "}"
    return str(tuple(batch.shape))


def _archive_kind(path: Path) -> str:
    """``"torchscript"`` or ``"torch.export"``, from the archive's members."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            roots = {name.split("/", 1)[0] for name in names}
            if len(roots) != 1:
                raise FormatError(
                    "not a TorchScript or torch.export file (a zip archive, but not one "
                    f"torch wrote); {_SAVE_HINT}",
                    path=path,
                )
            root = roots.pop() + "/"
            if f"{root}archive_format" in names:
                if archive.read(f"{root}archive_format").strip() == b"pt2":
                    _check_export_members(path, archive, root, names)
                    return "torch.export"
            elif f"{root}constants.pkl" in names and any(
                n.startswith(f"{root}code/") for n in names
            ):
                return "torchscript"
            elif f"{root}data.pkl" in names:
                raise FormatError(
                    "a pickled checkpoint written by torch.save (a state_dict or a whole "
                    f"model); expcli never unpickles: {_SAVE_HINT}",
                    path=path,
                )
    except (zipfile.BadZipFile, OSError, KeyError) as e:
        raise FormatError(
            f"not a TorchScript or torch.export file (unreadable zip archive: {e}); {_SAVE_HINT}",
            path=path,
        ) from e
    raise FormatError(f"not a TorchScript or torch.export file; {_SAVE_HINT}", path=path)


def _check_export_members(
    path: Path, archive: zipfile.ZipFile, root: str, names: list[str]
) -> None:
    """Refuse a ``torch.export`` archive unless every member is plain data."""
    import torch
    from torch.export.pt2_archive import constants as pt2

    known = {f"{root}{pt2.ARCHIVE_FORMAT_PATH}", f"{root}{pt2.ARCHIVE_VERSION_PATH}"}
    known |= {f"{root}byteorder", f"{root}version"}
    models_prefix, models_suffix = pt2.MODELS_FILENAME_FORMAT.split("{}")
    models = [
        n[len(root) + len(models_prefix) : -len(models_suffix)]
        for n in names
        if n.startswith(root + models_prefix) and n.endswith(models_suffix)
    ]
    if not models:
        raise FormatError("a torch.export archive without a model", path=path)
    for model in models:
        known.add(root + pt2.MODELS_FILENAME_FORMAT.format(model))
        inputs = root + pt2.SAMPLE_INPUTS_FILENAME_FORMAT.format(model)
        known.add(inputs)
        if inputs not in names:
            raise FormatError(f"corrupt torch.export archive: no {inputs!r}", path=path)
        try:
            torch.load(io.BytesIO(archive.read(inputs)), weights_only=True)
        except Exception as e:
            raise FormatError(
                f"unsafe torch.export archive: its sample inputs {inputs!r} need unpickling",
                path=path,
            ) from e
        for config_format, folder, prefix in (
            (pt2.WEIGHTS_CONFIG_FILENAME_FORMAT, pt2.WEIGHTS_DIR, pt2.WEIGHT_FILENAME_PREFIX),
            (
                pt2.CONSTANTS_CONFIG_FILENAME_FORMAT,
                pt2.CONSTANTS_DIR,
                pt2.TENSOR_CONSTANT_FILENAME_PREFIX,
            ),
        ):
            config_name = root + config_format.format(model)
            known.add(config_name)
            try:
                entries = json.loads(archive.read(config_name))["config"]
            except (KeyError, ValueError, TypeError) as e:
                raise FormatError(
                    f"corrupt torch.export archive: {config_name!r}", path=path
                ) from e
            for fqn, entry in entries.items():
                member = str(entry.get("path_name", ""))
                if entry.get("use_pickle", True) or not member.startswith(prefix):
                    raise FormatError(
                        f"unsafe torch.export archive: {fqn!r} is stored as {member!r} "
                        "(pickled or a custom object); expcli never unpickles",
                        path=path,
                    )
                known.add(root + folder + member)
    for name in names:
        if name in known or name.startswith((f"{root}.data/", root + pt2.EXTRA_DIR)):
            continue
        if name.endswith("/"):
            continue
        raise FormatError(
            f"unsafe or unknown member {name!r} in a torch.export archive (compiled "
            "AOTInductor code, pickled or legacy payloads are refused)",
            path=path,
        )
