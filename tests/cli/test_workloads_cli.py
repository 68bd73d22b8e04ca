"""The compatibility suite: what model-written code commonly does, each in a fresh cell. The
standard library broadly, the system data in the root (time zones, CA bundle, MIME types,
C.UTF-8, fonts), and the scientific packages (numpy, pandas with time zones, matplotlib, PIL,
scipy) from two sources: Debian's python3-* packages through --python-path (only where the
guest is Debian's X.Y), and PyPI's wheels in a venv of the guest interpreter through --venv
($SNAPCELL_WORKLOAD_VENV, made by scripts/install-workload-venv; scripts/test makes one per
interpreter of the guest matrix). A package workload that cannot run is skipped with the
reason, or fails with SNAPCELL_REQUIRE_ALL=1. docs/workloads.md is the table of what works and
what is deliberately absent."""
import functools
import json
import os
import pathlib
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
DIST = "/usr/lib/python3/dist-packages"
# numpy, scipy, pandas and matplotlib together map more than the default 512 MiB.
BIG = ("--memory", "2G", "--python-path", DIST)


def guest_version():
    """The X.Y of the Python the CLI under test runs in cells by default (`python3` on PATH,
    then /usr/bin/python3: scripts/test's guest matrix puts each interpreter first on PATH),
    as `snapcell doctor --json` reports it."""
    root = pathlib.Path(__file__).resolve().parents[2]
    path = os.environ.get("SNAPCELL_BIN", str(root / "build" / "cli" / "snapcell"))
    helper = os.environ.get("SNAPCELL_HELPER",
                            str(pathlib.Path(path).resolve().parents[1] / "snapcell-cell"))
    r = subprocess.run([path, "doctor", "--json"], capture_output=True,
                       env={**os.environ, "SNAPCELL_HELPER": helper})
    if r.returncode != 0:
        raise RuntimeError(f"{path} doctor --json failed: {r.stderr.decode()}")
    return tuple(map(int, json.loads(r.stdout)["python"]["version"].split(".")[:2]))


def debian_python_version():
    r = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(*sys.version_info[:2])"],
                       capture_output=True, text=True)
    return tuple(map(int, r.stdout.split())) if r.returncode == 0 else None


GUEST = guest_version()
DEBIAN = debian_python_version()
# Debian's python3-* packages hold extension modules built for Debian's X.Y only.
GUEST_RUNS_DEBIAN_PACKAGES = GUEST == DEBIAN


@functools.lru_cache(maxsize=None)
def imports(python, *modules):
    code = "; ".join(f"import {m}" for m in modules)
    return subprocess.run([python, "-c", code], capture_output=True).returncode == 0


def unavailable(why):
    """A package workload that cannot run here: a skip saying why, a failure where every
    workload must run (SNAPCELL_REQUIRE_ALL=1)."""
    if os.environ.get("SNAPCELL_REQUIRE_ALL") == "1":
        pytest.fail(why + " (SNAPCELL_REQUIRE_ALL=1)")
    pytest.skip(why)


def workload_venv():
    """$SNAPCELL_WORKLOAD_VENV and the X.Y of the interpreter it was made from, or None."""
    venv = os.environ.get("SNAPCELL_WORKLOAD_VENV")
    if not venv:
        return None
    cfg = {key.strip(): value.strip() for key, _, value in
           (line.partition("=") for line in (pathlib.Path(venv) / "pyvenv.cfg").read_text()
            .splitlines())}
    version = cfg.get("version") or cfg.get("version_info") or "0.0"
    return venv, tuple(map(int, version.split(".")[:2]))


@pytest.fixture(params=["debian_packages", "pypi_venv"])
def packages(request):
    """The `snapcell run` arguments that give a cell the scientific packages (a function of the
    modules the test imports), from Debian's python3-* packages or from the PyPI venv; the
    matrix deselects the first (-k 'not debian_packages') where the guest is not Debian's X.Y."""
    guest = ".".join(map(str, GUEST))

    def args(*modules):
        if request.param == "debian_packages":
            if not GUEST_RUNS_DEBIAN_PACKAGES:
                debian = ".".join(map(str, DEBIAN)) if DEBIAN else "(none: no /usr/bin/python3)"
                unavailable(f"the guest Python {guest} cannot load Debian's python3-* packages, "
                            f"built for Python {debian}")
            if not imports("/usr/bin/python3", *modules):
                unavailable(f"Debian's packages for {', '.join(modules)} are not installed "
                            "(scripts/install-test-deps)")
            return BIG
        return ("--memory", "2G", "--venv", pypi_venv(*modules))

    return args


def pypi_venv(*modules):
    """The venv of the guest interpreter with the PyPI packages ($SNAPCELL_WORKLOAD_VENV),
    checked to import modules; a skip (a failure with SNAPCELL_REQUIRE_ALL=1) without one."""
    guest = ".".join(map(str, GUEST))
    found = workload_venv()
    if not found:
        unavailable("no $SNAPCELL_WORKLOAD_VENV: scripts/install-workload-venv PYTHON makes "
                    f"a venv of the guest Python {guest} with the PyPI packages")
    venv, version = found
    if version != GUEST:
        pytest.fail(f"$SNAPCELL_WORKLOAD_VENV {venv} is of Python "
                    f"{'.'.join(map(str, version))}, the guest is {guest}")
    if not imports(f"{venv}/bin/python", *modules):
        pytest.fail(f"the venv {venv} cannot import {', '.join(modules)} "
                    "(scripts/install-workload-venv)")
    return venv


def landlock_abi():
    """The kernel's Landlock ABI (0: none); cells exec their python3 only with Landlock."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1))
    return max(abi, 0)


needs_landlock = pytest.mark.skipif(not landlock_abi(), reason="exec in a cell needs Landlock")


def run_json(snapcell, code, *args):
    r = snapcell("run", *args, "-", stdin=code.encode())
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.splitlines()[-1])


def test_stdlib_works_in_a_fresh_cell(snapcell):
    got = run_json(snapcell, (HERE / "compat_stdlib.py").read_text())
    # tomllib is new in Python 3.11.
    tomllib = {"tomllib": 1} if GUEST >= (3, 11) else {}
    assert got == {**tomllib,
        "asyncio": 6, "compress": True, "csv": "a,1\r\n", "ctypes": 3, "ctypes_cb": 2,
        "decimal": "0.3", "email": "hi", "hashlib": "e3b0c442", "locale": "C.UTF-8",
        "mimetypes": "text/csv", "mp_fork": 14, "sqlite3": 3, "ssl": True,
        "tempfile": ["f"], "threads": 30, "xml": "1",
        "zoneinfo": "-1 day, 19:00:00",
    }


def test_root_holds_system_data_and_nothing_else_of_the_host(snapcell):
    got = run_json(snapcell, """
import json, os, sys
print(json.dumps({
    "base_prefix": sys.base_prefix, "python3": os.path.realpath("/usr/bin/python3"),
    "root": sorted(os.listdir("/")),
    "etc": sorted(os.listdir("/etc")),
    "alternatives": sorted(os.listdir("/etc/alternatives")),
    "ssl_cert_file": os.environ.get("SSL_CERT_FILE"),
    "mplbackend": os.environ.get("MPLBACKEND"),
    "paris": os.path.exists("/usr/share/zoneinfo/Europe/Paris"),
    "tzdata_zi": os.path.exists("/usr/share/zoneinfo/tzdata.zi"),
    "usr_share": sorted(os.listdir("/usr/share")),
    "proc": os.path.exists("/proc/self"), "sh": os.path.exists("/bin/sh"),
    "usr_bin": sorted(os.listdir("/usr/bin")) if os.path.exists("/usr/bin") else None,
}))""")
    # /lib32 and /libx32 are links into /usr where the host has them (merged /usr).
    # The interpreter's prefix where it is not under /usr (a pyenv build in /root).
    top = {got["base_prefix"].split("/")[1]} - {"usr"}
    assert set(got["root"]) - {"lib32", "libx32"} - top == {
        ".snapcell", "bin", "dev", "etc", "input", "lib", "lib64", "output", "sbin", "tmp", "usr"}
    assert set(got["etc"]) <= {"alternatives", "group", "hostname", "ld.so.cache",
                               "matplotlibrc", "mime.types", "passwd", "ssl", "hosts",
                               "nsswitch.conf"}
    assert {"mime.types", "ssl", "passwd"} <= set(got["etc"])
    # Only the BLAS/LAPACK links numpy needs, not the host's list of software.
    assert all(".so" in name for name in got["alternatives"]), got["alternatives"]
    assert got["ssl_cert_file"] == "/etc/ssl/certs/ca-certificates.crt"
    assert got["mplbackend"] == "Agg"
    assert got["paris"] and got["tzdata_zi"]
    assert set(got["usr_share"]) <= {"zoneinfo", "fonts", "matplotlib"}
    assert not got["proc"] and not got["sh"]
    # Links to the interpreter, and its copy where it lives in /usr/bin (Debian's).
    exe = got["python3"].split("/")[-1] if got["python3"].startswith("/usr/bin/") else None
    assert set(got["usr_bin"]) == {"python", "python3"} | ({exe} if exe else set())


def test_system_data_is_read_only(snapcell):
    got = run_json(snapcell, """
import json, os
paths = ["/usr/share/zoneinfo", "/etc/ssl/certs/ca-certificates.crt", "/etc/mime.types",
         "/usr/lib/locale/C.utf8"]
print(json.dumps([bool(os.statvfs(p).f_flag & os.ST_RDONLY) and
                  bool(os.statvfs(p).f_flag & os.ST_NOEXEC) for p in paths]))""")
    assert got == [True] * 4


def test_pandas_with_time_zones(snapcell, packages):
    got = run_json(snapcell, """
import json, zoneinfo, pandas as pd, pytz
ts = pd.Timestamp("2024-07-01 12:00", tz="Europe/Paris").tz_convert("UTC")
idx = pd.date_range("2024-03-30", periods=3, freq="D", tz="Europe/Berlin")
ny = pd.Timestamp("2024-01-15 09:30", tz=zoneinfo.ZoneInfo("America/New_York"))
print(json.dumps({"ts": str(ts), "ny": str(pytz.timezone("America/New_York")),
                  "offsets": [str(t.utcoffset()) for t in idx], "zoneinfo": str(ny.utcoffset())}))""",
                   *packages("pandas", "pytz"))
    assert got == {"ts": "2024-07-01 10:00:00+00:00", "ny": "America/New_York",
                   "offsets": ["1:00:00", "1:00:00", "2:00:00"], "zoneinfo": "-1 day, 19:00:00"}


def test_matplotlib_saves_a_png_that_pil_reads(snapcell, packages, tmp_path):
    got = run_json(snapcell, """
import json, matplotlib, matplotlib.pyplot as plt, PIL.Image
from matplotlib import font_manager
fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
ax.plot([1, 3, 2]); ax.set_title("Température")
fig.savefig("/output/chart.png")
font = font_manager.findfont("DejaVu Sans", fallback_to_default=False)
print(json.dumps({"backend": matplotlib.get_backend().lower(), "size": PIL.Image.open("/output/chart.png").size,
                  "font": font.endswith("DejaVuSans.ttf")}))""", *packages("matplotlib", "PIL"),
                   "--output", tmp_path)
    assert got == {"backend": "agg", "size": [200, 150], "font": True}
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_numpy_and_scipy(snapcell, packages):
    got = run_json(snapcell, """
import json, numpy as np, scipy.stats, scipy.optimize, scipy.fft
a = np.arange(12.0).reshape(3, 4)
r = scipy.optimize.minimize_scalar(lambda x: (x - 2) ** 2)
print(json.dumps({"dot": float((a @ a.T).trace()), "cdf": float(scipy.stats.norm.cdf(0)),
                  "min": round(float(r.x), 4), "fft": round(float(abs(scipy.fft.fft([1, 0, 0, 0])[1])), 4)}))""",
                   *packages("numpy", "scipy"))
    assert got == {"dot": 506.0, "cdf": 0.5, "min": 2.0, "fft": 1.0}


def test_a_compiled_package_only_in_the_venv(snapcell):
    """A cell imports the extension module of a package that only the guest interpreter's venv
    has (numpy, from PyPI's wheel for that X.Y), from the venv; a cell of the same interpreter
    without the venv cannot import it."""
    venv = pypi_venv("numpy")
    want = subprocess.run([f"{venv}/bin/python", "-c", "import numpy; print(numpy.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    code = """
import json, os, sys
try:
    import numpy, numpy._core._multiarray_umath as core
except ImportError as e:
    print(json.dumps({"error": type(e).__name__}))
else:
    site = [p for p in sys.path if p.endswith("site-packages") and core.__file__.startswith(p + "/")]
    print(json.dumps({"version": list(sys.version_info[:2]), "numpy": numpy.__version__,
                      "core": os.path.basename(core.__file__), "site": site,
                      "base_prefix": sys.base_prefix}))
"""
    got = run_json(snapcell, code, "--venv", venv)
    tag = "cpython-%d%d-x86_64-linux-gnu" % GUEST
    assert got["version"] == list(GUEST) and got["numpy"] == want, got
    assert got["core"] == f"_multiarray_umath.{tag}.so", got
    assert got["site"] and not got["site"][0].startswith(got["base_prefix"] + "/"), got
    assert run_json(snapcell, code) == {"error": "ModuleNotFoundError"}


def make_tree(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():  # a venv's bin/python links to /usr/bin/python3.11
            p.chmod(0o755 if p.is_dir() else 0o644)
    root.parent.chmod(0o755)


def test_preloaded_modules_are_in_every_fresh_cell(snapcell, tmp_path):
    make_tree(tmp_path / "m", {"heavy.py": "VALUE = 42\n"})
    code = b"import sys; print('heavy' in sys.modules, sys.modules['heavy'].VALUE == 42)"
    r = snapcell("run", "--python-path", tmp_path / "m", "--preload", "heavy", "-", stdin=code)
    assert (r.returncode, r.stdout) == (0, b"True True\n"), r.stderr
    # Without --preload the cell imports it itself.
    r = snapcell("run", "--python-path", tmp_path / "m", "-",
                 stdin=b"import sys; print('heavy' in sys.modules)")
    assert r.stdout == b"False\n"


def test_what_a_preload_prints_reaches_no_cell(snapcell, tmp_path):
    # `this` prints the Zen of Python when imported; left in the template's stdout buffer,
    # every forked cell would flush it into its own output.
    make_tree(tmp_path / "m", {"noisy.py": "import sys\nprint('from the preload')\n"
                                            "print('to stderr', file=sys.stderr)\n"})
    r = snapcell("run", "--python-path", tmp_path / "m", "--preload", "noisy", "--preload",
                 "this", "-", stdin=b"print(1)")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"1\n", b"")


def test_a_failing_preload_fails_creation_with_its_traceback(snapcell, tmp_path):
    make_tree(tmp_path / "m", {"broken.py": "def f():\n    return 1 / 0\nf()\n"})
    r = snapcell("run", "--python-path", tmp_path / "m", "--preload", "broken", "-",
                 stdin=b"print(1)")
    assert r.returncode == 3
    assert b"preload broken: ZeroDivisionError: division by zero (at broken.py:2 < broken.py:3)" \
        in r.stderr, r.stderr
    r = snapcell("run", "--preload", "no_such_module", "-", stdin=b"print(1)")
    assert r.returncode == 3 and b"No module named 'no_such_module'" in r.stderr
    r = snapcell("run", "--preload", "a..b", "-", stdin=b"print(1)")
    assert r.returncode == 2 and b"not a dotted module name" in r.stderr


def test_a_preload_that_leaves_a_thread_running_is_refused(snapcell, tmp_path):
    make_tree(tmp_path / "m", {"threader.py": "import threading, time\n"
                               "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"})
    r = snapcell("run", "--python-path", tmp_path / "m", "--preload", "threader", "-",
                 stdin=b"print(1)")
    assert r.returncode == 3
    assert b"preload threader: leaves threads running" in r.stderr, r.stderr


def test_a_warmup_primes_every_fresh_cell_and_is_checked(snapcell, tmp_path):
    make_tree(tmp_path / "m", {"lazy.py": "CACHE = {}\ndef get(k):\n    return CACHE.setdefault(k, k * 2)\n"})
    code = b"import lazy; print(lazy.CACHE, 'df' in globals())"
    r = snapcell("run", "--python-path", tmp_path / "m", "--preload", "lazy", "--warmup",
                 "import lazy\ndf = lazy.get(21)\nprint('warming')", "-", stdin=code)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"{21: 42} False\n", b""), r.stderr
    (tmp_path / "w.py").write_text("import lazy\nlazy.get('ab')\n")
    r = snapcell("run", "--python-path", tmp_path / "m", "--warmup-file", tmp_path / "w.py",
                 "-", stdin=code)
    assert (r.returncode, r.stdout) == (0, b"{'ab': 'abab'} False\n"), r.stderr
    r = snapcell("run", "--warmup", "import lazy", "-", stdin=b"print(1)")
    assert r.returncode == 3
    assert b"warm-up: ModuleNotFoundError: No module named 'lazy' (at <warmup>:1 `import lazy`)" \
        in r.stderr, r.stderr
    r = snapcell("run", "--warmup", "import os; os.pipe()", "-", stdin=b"print(1)")
    assert r.returncode == 3 and b"warm-up: leaves descriptor" in r.stderr, r.stderr
    r = snapcell("run", "--warmup-file", tmp_path / "nope.py", "-", stdin=b"print(1)")
    assert r.returncode == 2 and b"--warmup-file" in r.stderr and b"No such file" in r.stderr
    (tmp_path / "big.py").write_text("#" * 65537)
    r = snapcell("run", "--warmup-file", tmp_path / "big.py", "-", stdin=b"print(1)")
    assert r.returncode == 2 and b"65537 bytes of code; the limit is 65536" in r.stderr
    (tmp_path / "nul.py").write_bytes(b"x = 1\0")
    r = snapcell("run", "--warmup-file", tmp_path / "nul.py", "-", stdin=b"print(1)")
    assert r.returncode == 2 and b"a NUL byte in the code" in r.stderr


def test_preloaded_numpy_keeps_the_template_single_threaded(snapcell, packages):
    # OpenBLAS starts a thread per CPU at import unless pinned; the user's value comes back
    # for the code's environment.
    r = snapcell("run", *packages("numpy"), "--env", "OPENBLAS_NUM_THREADS=4", "--preload", "numpy", "-",
                 stdin=b"import os, numpy; print(os.environ['OPENBLAS_NUM_THREADS'], "
                       b"numpy.ones(3) @ numpy.ones(3))")
    assert (r.returncode, r.stdout) == (0, b"4 3.0\n"), r.stderr


def test_preloaded_pandas_and_pyplot(snapcell, packages, tmp_path):
    r = snapcell("run", *packages("pandas", "matplotlib"), "--preload", "pandas", "--preload", "matplotlib.pyplot",
                 "--output", tmp_path, "-", stdin=b"""
import sys
loaded = all(m in sys.modules for m in ("pandas", "matplotlib.pyplot"))
import pandas as pd, matplotlib.pyplot as plt
df = pd.DataFrame({"a": [1, 2, 3]})
df.plot(); plt.savefig("/output/p.png")
print(int(df.a.sum()), loaded)
""")
    assert (r.returncode, r.stdout) == (0, b"6 True\n"), r.stderr
    assert (tmp_path / "p.png").stat().st_size > 1000


def make_venv(path):
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(path)], check=True)
    site = path / "lib" / "python3.11" / "site-packages"
    make_tree(path, {
        "lib/python3.11/site-packages/vmod/__init__.py": "WHERE = 'venv'\n",
        # A path line (relative to site-packages) and an import line, as pip's and
        # setuptools' .pth files have.
        "lib/python3.11/site-packages/extra.pth": "../../../src\nimport os; os.environ['PTH'] = 'ran'\n",
        "src/srcmod.py": "WHERE = 'src'\n",
    })
    return site


def test_venv_site_packages_and_pth_files(snapcell, tmp_path):
    venv = tmp_path / "venv"
    make_venv(venv)
    # With a python path too: two directories handed to the helper, which once clobbered
    # the helper's own descriptor.
    make_tree(tmp_path / "m", {"pmod.py": "WHERE = 'path'\n"})
    r = snapcell("run", "--python-path", tmp_path / "m", "--venv", venv, "-", stdin=b"""
import os, sys, vmod, srcmod, pmod
assert sys.path.index(os.path.dirname(pmod.__file__)) < sys.path.index(os.path.dirname(os.path.dirname(vmod.__file__)))
print(vmod.WHERE, srcmod.WHERE, os.environ.get("PTH"))
try:
    open(vmod.__file__, "a")
except OSError as e:  # EROFS from the read-only overlay; EACCES where it is a plain bind
    print("refused" if e.errno in (13, 30) else e)
""")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [b"venv src ran", b"refused"]


def test_a_pth_file_that_leaves_a_thread_is_refused(snapcell, tmp_path):
    venv = tmp_path / "venv"
    site = make_venv(venv)
    (site / "spin.pth").write_text(
        "import threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    r = snapcell("run", "--venv", venv, "-", stdin=b"print(1)")
    assert r.returncode == 3, r.stderr
    assert b".pth files or sitecustomize leave threads running" in r.stderr, r.stderr


def test_sitecustomize_runs_once_in_the_template(snapcell, tmp_path):
    venv = tmp_path / "venv"
    site = make_venv(venv)
    # It records the seccomp mode it ran under (prctl PR_GET_SECCOMP): 0 in the template, 2 in
    # a cell, which the code reads back.
    (site / "sitecustomize.py").write_text(
        "import ctypes, os\nos.environ['SC_CUSTOM'] = str(ctypes.CDLL(None).prctl(21, 0, 0, 0, 0))\n")
    code = b"import ctypes, os; print(os.environ['SC_CUSTOM'], ctypes.CDLL(None).prctl(21, 0, 0, 0, 0))"
    r = snapcell("run", "--venv", venv, "-", stdin=code)
    assert (r.returncode, r.stdout) == (0, b"0 2\n"), r.stderr
    # A broken one fails the sandbox's creation with its error.
    (site / "sitecustomize.py").write_text("raise RuntimeError('custom broke')\n")
    r = snapcell("run", "--venv", venv, "-", stdin=b"print(1)")
    assert r.returncode == 3 and b"custom broke" in r.stderr, r.stderr


@needs_landlock
def test_an_exec_of_sys_executable_sees_the_venv_and_python_paths(snapcell, tmp_path):
    venv = tmp_path / "venv"
    make_venv(venv)
    make_tree(tmp_path / "m", {"pmod.py": "WHERE = 'path'\n"})
    got = run_json(snapcell, """
import json, subprocess, sys
child = "import vmod, srcmod, pmod; print(vmod.WHERE, srcmod.WHERE, pmod.WHERE)"
r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
print(json.dumps([r.stdout, r.stderr]))
""", "--python-path", tmp_path / "m", "--venv", venv)
    assert got == ["venv src path\n", ""]


def test_a_venv_of_an_old_python_or_without_its_interpreter_is_refused(snapcell, tmp_path):
    venv = tmp_path / "v39"
    (venv / "lib" / "python3.9" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /opt/python3.9/bin\nversion = 3.9.18\n")
    r = snapcell("run", "--venv", venv, "-", stdin=b"print(1)")
    assert r.returncode == 2
    assert b"made by Python 3.9.18: snapcell runs CPython 3.10 or newer" in r.stderr, r.stderr
    venv = tmp_path / "v312"
    (venv / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /opt/python3.12/bin\nversion = 3.12.4\n")
    r = snapcell("run", "--venv", venv, "-", stdin=b"print(1)")
    assert r.returncode == 2
    assert b"the interpreter it was made from is gone" in r.stderr, r.stderr


def test_the_analysis_example_leaves_a_chart_and_a_csv(snapcell, packages, tmp_path):
    examples = HERE.parents[1] / "examples"
    pkgs = packages("pandas", "matplotlib")
    r = snapcell("run", *pkgs, "--preload", "pandas", "--preload",
                 "matplotlib.pyplot", "--warmup-file", examples / "analysis_warmup.py",
                 "--workspace", examples / "sales",
                 "--output", tmp_path, examples / "analysis.py")
    assert r.returncode == 0, r.stderr
    assert b"540 sales" in r.stdout and b"best region: west" in r.stdout
    assert (tmp_path / "monthly_revenue.png").read_bytes()[:4] == b"\x89PNG"
    lines = (tmp_path / "monthly_revenue.csv").read_text().splitlines()
    assert lines[0] == "date,north,south,west" and len(lines) == 13
    # Without emptying matplotlib's font cache the warm-up would leave its font files open.
    warmup = (examples / "analysis_warmup.py").read_text()
    (tmp_path / "w.py").write_text(warmup.replace("font_manager._get_font.cache_clear()", ""))
    r = snapcell("run", *pkgs, "--preload", "pandas", "--preload",
                 "matplotlib.pyplot", "--warmup-file", tmp_path / "w.py",
                 "-", stdin=b"print(1)")
    assert r.returncode == 3 and b"warm-up: leaves descriptor" in r.stderr, r.stderr


@needs_landlock
def test_sys_executable_subprocess_and_python_m(snapcell, tmp_path):
    (tmp_path / "d.json").write_text('{"b": 1, "a": [1, 2]}')
    got = run_json(snapcell, """
import json, subprocess, sys
r = subprocess.run([sys.executable, "-c", "print(6*7)"], capture_output=True, text=True)
m = subprocess.run(["python3", "-m", "json.tool", "--sort-keys", "--compact", "/input/d.json"],
                   capture_output=True, text=True)
print(json.dumps({"exe": sys.executable, "c": r.stdout, "m": m.stdout, "err": r.stderr + m.stderr}))
""", "--workspace", tmp_path)
    assert got == {"exe": got["exe"], "c": "42\n", "m": '{"a":[1,2],"b":1}\n', "err": ""}
    assert got["exe"].startswith("/") and "/python3" in got["exe"], got


@needs_landlock
def test_multiprocessing_spawn_pool(snapcell):
    got = run_json(snapcell, """
import json, math, multiprocessing
with multiprocessing.get_context("spawn").Pool(2) as pool:
    print(json.dumps(pool.map(math.factorial, range(6))))
""")
    assert got == [1, 1, 2, 6, 24, 120]


@pytest.mark.skipif(landlock_abi() < 6, reason="AF_UNIX listeners need Landlock ABI 6")
def test_multiprocessing_forkserver_pool(snapcell):
    got = run_json(snapcell, """
import json, math, multiprocessing
with multiprocessing.get_context("forkserver").Pool(2) as pool:
    print(json.dumps(pool.map(math.factorial, range(6))))
""")
    assert got == [1, 1, 2, 6, 24, 120]
