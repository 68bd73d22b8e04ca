"""Finds the snapcell binary under test: $SNAPCELL_BIN, or the default build directory. The
binary runs the build tree's helper ($SNAPCELL_HELPER, default: beside the CLI's directory), as
`meson devenv` would set it; the installed default is for installed builds only."""
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "net"))
import testnet  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def snapcell_paths():
    path = os.environ.get("SNAPCELL_BIN", str(ROOT / "build" / "cli" / "snapcell"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"snapcell binary not found at {path}: build first (ninja -C build)")
    helper = os.environ.get("SNAPCELL_HELPER",
                            str(pathlib.Path(path).resolve().parents[1] / "snapcell-cell"))
    return path, helper


@pytest.fixture(scope="session")
def snapcell(snapcell_paths):
    path, helper = snapcell_paths

    def run(*args, stdin=None, timeout=60, env=None):
        full_env = {**os.environ, "SNAPCELL_HELPER": helper, **(env or {})}
        return subprocess.run([path, *map(str, args)], input=stdin, capture_output=True,
                              timeout=timeout, env=full_env)

    return run


@pytest.fixture(scope="session")
def host_level(snapcell):
    """The isolation level sandboxes get here, as `snapcell doctor` reports it: `cgroups` for
    root (a memory cgroup per cell), `namespaces` for an unprivileged caller."""
    r = snapcell("doctor", "--json")
    assert r.returncode == 0, r.stderr
    import json
    return json.loads(r.stdout)["level"]


@pytest.fixture(scope="session")
def net(tmp_path_factory):
    """Test hosts for the network tests (tests/net/testnet.py); they need root."""
    if os.geteuid() != 0:
        pytest.skip("test hosts need root")
    t = testnet.TestNet(tmp_path_factory.mktemp("net"))
    yield t
    t.close()
