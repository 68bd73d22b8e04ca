"""The value types of the CodeAct surface, with the reference integration's names and fields.
Their normalisation is the C library's (snapcell_normalize_*, snapcell_config_allow); these
functions only call it and build the tuples."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple, TypeAlias, Union

from .. import _native


class FileMount(NamedTuple):
    """A host file or directory shown under ``/input`` (``host_path`` resolved)."""

    host_path: Path
    mount_path: str


class AllowedDomain(NamedTuple):
    """One network target, optionally limited to some HTTP methods (None = any)."""

    target: str
    methods: tuple[str, ...] | None = None


FileMountInput: TypeAlias = Union[str, "os.PathLike[str]", tuple[Union[str, "os.PathLike[str]"], str], FileMount]
AllowedDomainInput: TypeAlias = Union[str, tuple[str, Union[str, Sequence[str]]], AllowedDomain]


def normalize_file_mount(value: FileMountInput) -> FileMount:
    """str (same path on the host and under /input), (host, mount) pair, or FileMount."""
    if isinstance(value, (str, os.PathLike)):
        host, mount = value, os.fspath(value)
    elif isinstance(value, tuple) and len(value) == 2:
        host, mount = value
    else:
        raise TypeError(f"a file mount is a path, a (host_path, mount_path) pair or a FileMount, not {value!r}")
    if not isinstance(mount, str):
        raise TypeError(f"mount_path must be a string, not {type(mount).__name__}")
    cfg = _native.Config()
    cfg.add_mount(os.path.expanduser(os.fspath(host)), mount)
    resolved, normalized = cfg.mounts()[0]
    return FileMount(Path(resolved), normalized)


def normalize_mount_path(mount_path: str) -> str:
    if not isinstance(mount_path, str):
        raise TypeError(f"mount_path must be a string, not {type(mount_path).__name__}")
    return _native.normalize_mount_path(mount_path)


def normalize_allowed_domain(value: AllowedDomainInput) -> AllowedDomain:
    """str, (target, method-or-methods) pair, or AllowedDomain."""
    if isinstance(value, str):
        target, methods = value, None
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        target, methods = value
    else:
        raise TypeError(f"an allowed domain is a target, a (target, methods) pair or an AllowedDomain, not {value!r}")
    if isinstance(methods, str):
        methods = [methods]
    elif methods is not None:
        methods = list(methods)
        if not all(isinstance(m, str) for m in methods):
            raise TypeError(f"HTTP methods must be strings: {methods!r}")
    # The reference's host form ("https://api.example.com/v1" -> "api.example.com") first, so
    # what is listed, and allowed, is what the reference code allowed; snapcell's own surfaces
    # keep path rules.
    cfg = _native.Config()
    cfg.allow(_native.normalize_domain(target), methods)
    normalized, normalized_methods = cfg.allowed()[0]
    return AllowedDomain(normalized, normalized_methods)


def normalize_domain(target: str) -> str:
    if not isinstance(target, str):
        raise TypeError(f"a domain must be a string, not {type(target).__name__}")
    return _native.normalize_domain(target)


def is_mount_input(value: object) -> bool:
    """Whether value is one mount rather than a sequence of them."""
    return isinstance(value, (str, os.PathLike, FileMount)) or (
        isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str)
        and isinstance(value[0], (str, os.PathLike))
    )


def is_domain_input(value: object) -> bool:
    if isinstance(value, (str, AllowedDomain)):
        return True
    return (
        isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
        and (isinstance(value[1], str) or isinstance(value[1], Sequence))
    )
