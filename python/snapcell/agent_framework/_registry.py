"""Sandboxes cached by configuration, shared by the run tools a provider hands out.

One sandbox per key (tools, limits, mounts with their tree signatures, network entries);
concurrent first calls with one key build one template. Entries whose key went stale (a file
under a mount changed) are closed once no run uses them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from .._sandbox import Sandbox

MAX_IDLE_SANDBOXES = 8


class _Entry:
    __slots__ = ("sandbox", "users", "session")

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self.users = 0
        self.session: Any = None  # the stateful session of this configuration, if any


class SandboxRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}  # insertion order = age
        self._building: dict[Hashable, threading.Lock] = {}
        self._closed = False

    def acquire(self, key: Hashable, make: Callable[[], Sandbox]) -> _Entry:
        """The entry for key, built by the first caller; blocks (a worker thread) meanwhile."""
        with self._lock:
            self._check_open()
            build_lock = self._building.setdefault(key, threading.Lock())
        with build_lock:
            with self._lock:
                self._check_open()
                entry = self._entries.get(key)
                if entry is not None:
                    entry.users += 1
                    return entry
            sandbox = make()
            with self._lock:
                if self._closed:
                    sandbox.close()
                    self._check_open()
                entry = self._entries[key] = _Entry(sandbox)
                entry.users += 1
                stale = self._evict_locked()
        for sb in stale:
            sb.close()
        return entry

    def release(self, entry: _Entry) -> None:
        with self._lock:
            entry.users -= 1
            stale = self._evict_locked()
        for sb in stale:
            sb.close()

    def _evict_locked(self) -> list[Sandbox]:
        """Closes the oldest idle sandboxes past the cap (callers close them unlocked)."""
        stale = []
        excess = len(self._entries) - MAX_IDLE_SANDBOXES
        for key, entry in list(self._entries.items()):
            if excess <= 0:
                break
            if entry.users == 0:
                del self._entries[key]
                self._building.pop(key, None)
                stale.append(entry.sandbox)
                excess -= 1
        return stale

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this execute_code tool has been closed")

    def close(self) -> None:
        """Ends every sandbox (running cells are killed) and removes its temporary files."""
        with self._lock:
            self._closed = True
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            entry.sandbox.close()
