"""The compatibility suite: what model-written code commonly does, each in a fresh cell. The
standard library broadly, the system data in the root (time zones, CA bundle, MIME types,
C.UTF-8, fonts), and Debian's python3-* packages (numpy, pandas with time zones, matplotlib,
PIL, scipy) through --python-path. docs/workloads.md is the table of what works and what is
deliberately absent."""
import json
import pathlib
import subprocess

import pytest

HERE = pathlib.Path(__file__).resolve().parent
DIST = "/usr/lib/python3/dist-packages"
# numpy, scipy, pandas and matplotlib together map more than the default 512 MiB.
BIG = ("--memory", "2G", "--python-path", DIST)


def debian_has(*modules):
    """Whether Debian's interpreter (the one snapcell embeds) imports these."""
    code = "; ".join(f"import {m}" for m in modules)
    return subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True).returncode == 0


def run_json(snapcell, code, *args):
    r = snapcell("run", *args, "-", stdin=code.encode())
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.splitlines()[-1])


def test_stdlib_works_in_a_fresh_cell(snapcell):
    got = run_json(snapcell, (HERE / "compat_stdlib.py").read_text())
    assert got == {
        "asyncio": 6, "compress": True, "csv": "a,1\r\n", "ctypes": 3, "ctypes_cb": 2,
        "decimal": "0.3", "email": "hi", "hashlib": "e3b0c442", "locale": "C.UTF-8",
        "mimetypes": "text/csv", "mp_fork": 14, "sqlite3": 3, "ssl": True,
        "tempfile": ["f"], "threads": 30, "tomllib": 1, "xml": "1",
        "zoneinfo": "-1 day, 19:00:00",
    }


def test_root_holds_system_data_and_nothing_else_of_the_host(snapcell):
    got = run_json(snapcell, """
import json, os
print(json.dumps({
    "root": sorted(os.listdir("/")),
    "etc": sorted(os.listdir("/etc")),
    "alternatives": sorted(os.listdir("/etc/alternatives")),
    "ssl_cert_file": os.environ.get("SSL_CERT_FILE"),
    "mplbackend": os.environ.get("MPLBACKEND"),
    "paris": os.path.exists("/usr/share/zoneinfo/Europe/Paris"),
    "tzdata_zi": os.path.exists("/usr/share/zoneinfo/tzdata.zi"),
    "usr_share": sorted(os.listdir("/usr/share")),
    "proc": os.path.exists("/proc/self"), "sh": os.path.exists("/bin/sh"),
    "usr_bin": os.path.exists("/usr/bin"),
}))""")
    assert got["root"] == [".snapcell", "bin", "dev", "etc", "input", "lib", "lib32", "lib64",
                           "output", "sbin", "tmp", "usr"] or "lib32" not in got["root"]
    assert set(got["etc"]) <= {"alternatives", "group", "hostname", "ld.so.cache",
                               "matplotlibrc", "mime.types", "passwd", "ssl"}
    assert {"mime.types", "ssl", "passwd"} <= set(got["etc"])
    # Only the BLAS/LAPACK links numpy needs, not the host's list of software.
    assert all(".so" in name for name in got["alternatives"]), got["alternatives"]
    assert got["ssl_cert_file"] == "/etc/ssl/certs/ca-certificates.crt"
    assert got["mplbackend"] == "Agg"
    assert got["paris"] and got["tzdata_zi"]
    assert set(got["usr_share"]) <= {"zoneinfo", "fonts", "matplotlib"}
    assert not got["proc"] and not got["sh"] and not got["usr_bin"]


def test_system_data_is_read_only(snapcell):
    got = run_json(snapcell, """
import json, os
paths = ["/usr/share/zoneinfo", "/etc/ssl/certs/ca-certificates.crt", "/etc/mime.types",
         "/usr/lib/locale/C.utf8"]
print(json.dumps([bool(os.statvfs(p).f_flag & os.ST_RDONLY) and
                  bool(os.statvfs(p).f_flag & os.ST_NOEXEC) for p in paths]))""")
    assert got == [True] * 4


@pytest.mark.skipif(not debian_has("pandas", "pytz"), reason="Debian's python3-pandas not installed")
def test_debian_pandas_with_time_zones(snapcell):
    got = run_json(snapcell, """
import json, pandas as pd, pytz
ts = pd.Timestamp("2024-07-01 12:00", tz="Europe/Paris").tz_convert("UTC")
idx = pd.date_range("2024-03-30", periods=3, freq="D", tz="Europe/Berlin")
print(json.dumps({"ts": str(ts), "ny": str(pytz.timezone("America/New_York")),
                  "offsets": [str(t.utcoffset()) for t in idx]}))""", *BIG)
    assert got == {"ts": "2024-07-01 10:00:00+00:00", "ny": "America/New_York",
                   "offsets": ["1:00:00", "1:00:00", "2:00:00"]}


@pytest.mark.skipif(not debian_has("matplotlib", "PIL"), reason="Debian's matplotlib/PIL not installed")
def test_debian_matplotlib_saves_a_png_that_pil_reads(snapcell, tmp_path):
    got = run_json(snapcell, """
import json, matplotlib, matplotlib.pyplot as plt, PIL.Image
from matplotlib import font_manager
fig, ax = plt.subplots(figsize=(4, 3), dpi=50)
ax.plot([1, 3, 2]); ax.set_title("Température")
fig.savefig("/output/chart.png")
font = font_manager.findfont("DejaVu Sans", fallback_to_default=False)
print(json.dumps({"backend": matplotlib.get_backend(), "size": PIL.Image.open("/output/chart.png").size,
                  "font": font.endswith("DejaVuSans.ttf")}))""", *BIG, "--output", tmp_path)
    assert got == {"backend": "agg", "size": [200, 150], "font": True}
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(not debian_has("numpy", "scipy"), reason="Debian's numpy/scipy not installed")
def test_debian_numpy_and_scipy(snapcell):
    got = run_json(snapcell, """
import json, numpy as np, scipy.stats, scipy.optimize, scipy.fft
a = np.arange(12.0).reshape(3, 4)
r = scipy.optimize.minimize_scalar(lambda x: (x - 2) ** 2)
print(json.dumps({"dot": float((a @ a.T).trace()), "cdf": float(scipy.stats.norm.cdf(0)),
                  "min": round(float(r.x), 4), "fft": round(float(abs(scipy.fft.fft([1, 0, 0, 0])[1])), 4)}))""", *BIG)
    assert got == {"dot": 506.0, "cdf": 0.5, "min": 2.0, "fft": 1.0}
