"""The guest module (_snapcell_guest.abi3.so, beside the helper) imported in an ordinary Python
process: ImportError with a message, and nothing else done to the process: no seccomp filter,
no credential or capability change, no child, no descriptor opened, closed or changed. Each
interpreter of the machine that can load it (CPython >= 3.10) is tried, and for each
property the same import is also made with the helper's mark in the environment but no setup
descriptor (what a stray SNAPCELL_GUEST=template gives)."""
import glob
import json
import os
import pathlib
import subprocess

import pytest

# Run in the child: what it looks like before and after the import, then the import's error.
PROBE = r"""
import json, os, sys

def state():
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines()
                  if ":" in l)
    keep = ("Seccomp", "NoNewPrivs", "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff",
            "CapBnd", "CapAmb", "Threads")
    fds = {}
    for fd in sorted(os.listdir("/proc/self/fd")):
        try:
            fds[fd] = [os.readlink(f"/proc/self/fd/{fd}"), os.get_inheritable(int(fd)),
                       os.lseek(int(fd), 0, os.SEEK_CUR) if fd in ("0", "1", "2") else None]
        except OSError:
            fds[fd] = None
    children = open(f"/proc/self/task/{os.getpid()}/children").read().split()
    return {"status": {k: status[k].strip() for k in keep}, "fds": fds, "children": children,
            "sid": os.getsid(0), "pgid": os.getpgid(0), "cwd": os.getcwd(),
            "env": dict(os.environ)}

sys.path.insert(0, sys.argv[1])
before = state()
try:
    import _snapcell_guest
    error = None
except ImportError as e:
    error = str(e)
after = state()
after["fds"] = {k: v for k, v in after["fds"].items()}
print(json.dumps({"before": before, "after": after, "error": error}))
"""


def interpreters():
    found = ["/usr/bin/python3"] + sorted(glob.glob("/root/.pyenv/versions/3.1[0-9]*/bin/python3.1[0-9]"))
    return [p for p in found if os.access(p, os.X_OK)]


@pytest.fixture(scope="module")
def module_dir(snapcell_paths):
    _, helper = snapcell_paths
    d = pathlib.Path(helper).resolve().parent
    assert (d / "_snapcell_guest.abi3.so").is_file(), f"no guest module beside {helper}"
    return d


def probe(python, module_dir, env_extra):
    env = {"PATH": "/usr/bin:/bin", **env_extra}
    r = subprocess.run([python, "-c", PROBE, str(module_dir)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("env", [{}, {"SNAPCELL_GUEST": "template"}], ids=["plain", "marked"])
@pytest.mark.parametrize("python", interpreters())
def test_import_elsewhere_raises_and_does_nothing(python, module_dir, env):
    got = probe(python, module_dir, env)
    assert got["error"] and "only the snapcell-cell helper starts it" in got["error"], got
    before, after = got["before"], got["after"]
    assert after["status"]["Seccomp"] == before["status"]["Seccomp"] == "0"
    assert after["status"]["NoNewPrivs"] == before["status"]["NoNewPrivs"]
    for key in ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert after["status"][key] == before["status"][key], key
    assert after["status"]["Threads"] == before["status"]["Threads"] == "1"
    assert after["children"] == before["children"] == []
    assert after["fds"] == before["fds"]
    assert (after["sid"], after["pgid"], after["cwd"]) == (before["sid"], before["pgid"],
                                                             before["cwd"])
    assert after["env"] == before["env"]


def test_a_missing_or_broken_guest_module_is_named(snapcell, snapcell_paths, tmp_path):
    import shutil
    helper = tmp_path / "snapcell-cell"
    shutil.copy(snapcell_paths[1], helper)
    r = snapcell("run", "-", stdin=b"print(1)", env={"SNAPCELL_HELPER": str(helper)})
    assert r.returncode == 3
    assert b"the guest module _snapcell_guest.abi3.so beside the helper: missing or unreadable" in r.stderr, r.stderr
    # One the interpreter cannot load: its own words (the helper's stderr) say why.
    (tmp_path / "_snapcell_guest.abi3.so").write_bytes(b"not an ELF file")
    r = snapcell("run", "-", stdin=b"print(1)", env={"SNAPCELL_HELPER": str(helper)})
    assert r.returncode == 3
    assert b"ImportError" in r.stderr and b"_snapcell_guest.abi3.so" in r.stderr, r.stderr


def test_cells_see_no_trace_of_the_guest_module(snapcell):
    # Loaded by its file, never through sys.path; out of sys.modules; its bind detached, so
    # what is left in the root is the empty mount point.
    r = snapcell("run", "-", stdin=b"""
import os, sys
d = "/.snapcell/guest"
print("_snapcell_guest" in sys.modules, [p for p in sys.path if ".snapcell" in p],
      [os.stat(os.path.join(d, f)).st_size for f in os.listdir(d)])
""")
    assert (r.returncode, r.stdout) == (0, b"False [] [0]\n"), r.stderr
