"""Issue 19's attacks on the interpreter a cell runs, as the CLI shows them: what the host asks
the interpreter (`python -I -S -c`, src/core/python_probe.c) decides which host directories
cells see, so neither the caller's loader environment nor a lying answer may widen it. Each
check runs at the host's level and, where tests/simhost is built, at level rlimits (a
Docker-like seccomp filter: Landlock grants the directories instead of binds)."""
import os
import pathlib
import shutil
import stat
import tempfile

import pytest

SECRET = "sc-attack-secret-7f3a"


def levels(snapcell_paths):
    simhost = pathlib.Path(snapcell_paths[0]).resolve().parents[1] / "tests" / "simhost"
    found = [[]]
    if os.access(simhost, os.X_OK):
        found.append([str(simhost), "--docker-seccomp", "--"])
    return found


def debian_python():
    """Debian's interpreter where there is one: a root caller's sandbox at level rlimits
    cannot reach a pyenv build under the 0700 /root (docs/architecture.md)."""
    return ["--python", "/usr/bin/python3"] if os.access("/usr/bin/python3", os.X_OK) else []


def run_at(snapcell_paths, prefix, code, *args, env=None):
    import subprocess
    path, helper = snapcell_paths
    full_env = {**os.environ, "SNAPCELL_HELPER": helper, **(env or {})}
    return subprocess.run([*prefix, path, "run", *args, "-"], input=code.encode(),
                          capture_output=True, timeout=120, env=full_env)


@pytest.fixture
def library_dir():
    """A host directory (outside /tmp, which cells mount over) holding a copy of the zlib this
    process loaded and a secret beside it, readable by anyone: only the sandbox may hide it."""
    import zlib  # noqa: F401: maps libz
    libz = next((line.split()[-1] for line in open("/proc/self/maps")
                 if "/libz.so" in line.split()[-1]), None)
    if not libz:
        pytest.skip("this interpreter maps no shared libz to copy")
    d = pathlib.Path(tempfile.mkdtemp(prefix="sc-attack-", dir="/var/tmp"))
    d.chmod(0o755)
    shutil.copy(libz, d / "libz.so.1")
    (d / "secret").write_text(SECRET)
    (d / "secret").chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    yield d
    shutil.rmtree(d)


@pytest.mark.parametrize("variable", ["LD_PRELOAD", "LD_LIBRARY_PATH"])
def test_the_callers_loader_environment_binds_nothing_for_cells(snapcell_paths, library_dir,
                                                                 variable):
    """A library the caller's LD_PRELOAD or LD_LIBRARY_PATH loaded into the interpreter's
    probe made its whole directory (a home, say) readable in every cell, though the
    template's interpreter starts with no environment and never loads it."""
    value = str(library_dir / "libz.so.1") if variable == "LD_PRELOAD" else str(library_dir)
    code = (f"import os\n"
            f"for p in ['{library_dir}/secret', '{library_dir}']:\n"
            f"    try:\n"
            f"        print(p, open(p).read() if p.endswith('secret') else os.listdir(p))\n"
            f"    except OSError as e:\n"
            f"        print(p, type(e).__name__)\n")
    for prefix in levels(snapcell_paths):
        r = run_at(snapcell_paths, prefix, code, *debian_python(), env={variable: value})
        assert r.returncode == 0, (prefix, r.stderr)
        out = r.stdout.decode()
        assert SECRET not in out and "libz.so.1" not in out, (prefix, out)
        assert out.count("Error") == 2, (prefix, out)


@pytest.mark.parametrize("slash", ["/", "/usr/.."])
def test_an_interpreter_naming_slash_as_its_directory_is_refused(snapcell_paths, tmp_path,
                                                                  slash):
    """A hostile "interpreter" answering the probe with / as its standard library: at level
    rlimits every cell could read the whole host; at the other levels the bind failed with
    an obscure error. Refused when the sandbox is made, naming the cause."""
    python = shutil.which("python3") or "/usr/bin/python3"
    fake = tmp_path / "python3"
    fake.write_text(
        "#!/bin/sh\n"
        "printf '%s\\n' '{\"implementation\": \"cpython\", \"version\": [3, 11, 2], "
        f"\"executable\": \"{os.path.realpath(shutil.which(python) or python)}\", "
        f"\"stdlib\": \"{slash}\", \"platstdlib\": \"{slash}\", \"dynload\": \"{slash}\", "
        "\"libs\": []}'\n")
    fake.chmod(0o755)
    for prefix in levels(snapcell_paths):
        r = run_at(snapcell_paths, prefix, "print(sorted(__import__('os').listdir('/')))",
                   "--python", str(fake))
        assert r.returncode == 2, (prefix, r.stdout, r.stderr)
        assert b"names / as a directory it loads from" in r.stderr, (prefix, r.stderr)


OWNED_WRITES = r"""
import glob, os, sys
venv = sys.argv[1] if len(sys.argv) > 1 else os.environ["ATTACK_VENV"]
site = [p for p in sys.path if p.endswith("site-packages")]
targets = site + [venv, venv + "/bin", sys.base_prefix, sys.base_prefix + "/bin",
                  os.path.dirname(os.__file__), "/.snapcell/venv", "/.snapcell/venv/bin"]
targets += glob.glob(sys.base_prefix + "/lib/python3*/lib-dynload")
targets += glob.glob("/.snapcell/venv/lib/python3*/site-packages")
targets += glob.glob("/.snapcell/python/*") + glob.glob("/.snapcell/python/*/lib/python3*/site-packages")
written = []
for d in targets:
    try:
        open(os.path.join(d, "planted.pth"), "w").write("import os\n")
        written.append(d)
    except OSError:
        pass
files = [venv + "/pyvenv.cfg", venv + "/bin/python3", "/.snapcell/venv/pyvenv.cfg",
         os.__file__] + glob.glob(venv + "/lib/python3*/site-packages/*.pth")
files += glob.glob(sys.base_prefix + "/bin/python3*")
for f in files:
    for how in (lambda: os.chmod(f, 0o777), lambda: open(f, "a").close(),
                lambda: os.rename(f, f + ".x"), lambda: os.utime(f)):
        try:
            how()
            written.append(f)
        except OSError:
            pass
print("written", sorted(set(written)), len(site))
"""


def test_a_cell_cannot_write_the_venv_its_caller_owns(snapcell_paths):
    """A caller that is not root owns its venv (and the cell runs as that uid at level
    rlimits, as the user namespace's root mapped to it at level namespaces): the cell still
    cannot plant a .pth file, or change a file, in the venv, the root's venv over the
    interpreter, or the interpreter's prefix."""
    import subprocess
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or not setpriv or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to act as another user")
    as_user = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    if subprocess.run([*as_user, "test", "-x", snapcell_paths[0]]).returncode != 0:
        pytest.skip("the build tree is not reachable by uid 65534")
    home = pathlib.Path(tempfile.mkdtemp(prefix="sc-attack-owner-", dir="/var/tmp"))
    try:
        home.chmod(0o755)
        os.chown(home, 65534, 65534)
        venv = home / "venv"
        subprocess.run([*as_user, "/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)],
                       check=True, env={"PATH": "/usr/bin:/bin", "HOME": str(home)})
        for site in venv.glob("lib/python3*/site-packages"):
            (site / "own.pth").write_text("import sys\n")
            os.chown(site / "own.pth", 65534, 65534)
        for prefix in levels(snapcell_paths):
            r = run_at(snapcell_paths, [*as_user, "env", f"HOME={home}", *prefix], OWNED_WRITES,
                       "--python", "/usr/bin/python3", "--venv", str(venv),
                       "--env", f"ATTACK_VENV={venv}")
            assert r.returncode == 0, (prefix, r.stderr)
            assert r.stdout.decode().startswith("written [] "), (prefix, r.stdout)
            assert not r.stdout.decode().strip().endswith(" 0"), (prefix, r.stdout)
    finally:
        shutil.rmtree(home)


def guest_interpreter(snapcell_paths):
    """The interpreter cells run by default (python3 on PATH: scripts/test's guest matrix puts
    each first) and its prefix, as the host sees them."""
    import json
    import subprocess
    path, helper = snapcell_paths
    r = subprocess.run([path, "doctor", "--json"], capture_output=True, timeout=120,
                       env={**os.environ, "SNAPCELL_HELPER": helper})
    assert r.returncode == 0, r.stderr
    python = json.loads(r.stdout)["python"]["executable"]
    prefix = subprocess.run([python, "-I", "-c", "import sys; print(sys.base_prefix)"],
                            capture_output=True, text=True, check=True).stdout.strip()
    return python, prefix


def test_a_cell_cannot_write_the_prefix_or_venv_of_the_interpreter_its_caller_owns(
        snapcell_paths):
    """The guest interpreter of the matrix entry (a pyenv build the caller installed under its
    home, or Debian's, root's as the caller is), and a venv of it the caller made: a cell can
    plant or change nothing in either, though the caller owns both."""
    import subprocess
    python, prefix = guest_interpreter(snapcell_paths)
    if os.stat(prefix).st_uid != os.geteuid():
        pytest.skip(f"the caller does not own {prefix}, the prefix of {python}")
    top = pathlib.Path(tempfile.mkdtemp(prefix="sc-attack-prefix-", dir="/var/tmp"))
    try:
        top.chmod(0o755)
        venv = top / "venv"
        subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
        for site in venv.glob("lib/python3*/site-packages"):
            (site / "own.pth").write_text("import sys\n")
        r = run_at(snapcell_paths, [], OWNED_WRITES, "--venv", str(venv),
                   "--env", f"ATTACK_VENV={venv}")
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode().startswith("written [] "), r.stdout
        assert not r.stdout.decode().strip().endswith(" 0"), r.stdout
        assert not list(top.rglob("planted.pth")) and not list(top.rglob("*.x"))
        assert not os.path.exists(os.path.join(prefix, "planted.pth"))
    finally:
        shutil.rmtree(top)


# Everything of the host a cell can find: the listing of each directory above the interpreter's
# prefix (a pyenv build in a home: nothing of the home but the way to the prefix), and the
# whole tree searched for the canary left beside the venv.
SEEN = r"""
import json, os, sys
canary = sys.argv[1] if len(sys.argv) > 1 else os.environ["ATTACK_CANARY"]
above = {}
parts = sys.base_prefix.strip("/").split("/")
for i in range(1, len(parts)):
    d = "/" + "/".join(parts[:i])
    above[d] = sorted(os.listdir(d))
found = []
for top, dirs, files in os.walk("/"):
    if top in ("/dev", "/proc", "/sys"):
        dirs[:] = []
        continue
    found += [os.path.join(top, n) for n in dirs + files if canary in n]
print(json.dumps({"root": sorted(os.listdir("/")), "above": above, "found": found,
                  "prefix": sys.base_prefix}))
"""


def test_a_cell_sees_no_host_path_outside_what_was_bound(snapcell_paths):
    """With the guest interpreter of the matrix entry and a venv beside a canary: no directory
    above the prefix shows more than the way to it (pyenv's other versions, the rest of the
    home), no /var, /home or /srv, and the canary is nowhere in the cell's tree."""
    import json
    import subprocess
    python, prefix = guest_interpreter(snapcell_paths)
    top = pathlib.Path(tempfile.mkdtemp(prefix="sc-attack-seen-", dir="/var/tmp"))
    canary = f"sc-canary-{os.getpid()}"
    try:
        top.chmod(0o755)
        venv = top / "venv"
        subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
        (top / canary).write_text(SECRET)  # beside the venv, which is bound whole
        r = run_at(snapcell_paths, [], SEEN, "--venv", str(venv),
                   "--env", f"ATTACK_CANARY={canary}")
        assert r.returncode == 0, r.stderr
        got = json.loads(r.stdout)
    finally:
        shutil.rmtree(top)
    assert got["prefix"] == prefix
    parts = prefix.strip("/").split("/")
    for i, (d, listing) in enumerate(sorted(got["above"].items(), key=lambda kv: len(kv[0]))):
        if d in ("/usr", "/usr/local", "/opt"):
            continue  # the system's own directories, whose bound content tests/cli lists
        assert listing == [parts[i + 1]], (d, listing)
    assert not {"var", "home", "srv", "mnt", "media", "opt", "proc", "sys"} & set(got["root"]), got
    assert got["found"] == [], got["found"]


RECOVER_GUEST = rb"""
import importlib.machinery, importlib.util, os
# Where the template loaded it from: the root's file, or (level rlimits) the spawn's descriptor.
p = "/.snapcell/guest/_snapcell_guest.abi3.so"
if not os.path.exists("/.snapcell"):
    p = "/proc/self/fd/8"
loader = importlib.machinery.ExtensionFileLoader("_snapcell_guest", p)
try:
    # CPython keeps loaded single-phase extension modules by file and name: the empty mount
    # point left behind still yields the template's module.
    m = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
        "_snapcell_guest", p, loader=loader))
except ImportError as e:
    print("not recovered")
else:
    os.environ["SNAPCELL_GUEST"] = "template"
    try:
        m.main()
    except RuntimeError as e:
        print("refused:", e)
"""


def test_the_guest_module_recovered_in_a_cell_refuses_to_run(snapcell_paths):
    """Out of sys.modules and its file detached, the template's module object can still be
    had back in a cell from the interpreter's cache of extension modules; its main() then
    refuses (it ran once, in the template), whatever the cell's environment says."""
    for prefix in levels(snapcell_paths):
        r = run_at(snapcell_paths, prefix, RECOVER_GUEST.decode(), *debian_python())
        assert r.returncode == 0, (prefix, r.stderr)
        assert r.stdout in (b"not recovered\n",
                            b"refused: the snapcell template runs once, at its start\n"), (
            prefix, r.stdout)
