"""The wheel as a user installs it: scripts/build-wheel's (SNAPCELL_WHEEL, which
scripts/test-python sets) started the way docs/mcp.md says, `uvx --from WHEEL snapcell mcp`,
and from a fresh venv's `pip install WHEEL`, each serving MCP to the official SDK client."""

import asyncio
import os
import pathlib
import re
import subprocess
import sys
import zipfile

import pytest
from mcp import Client, StdioServerParameters

WHEEL = os.environ.get("SNAPCELL_WHEEL", "")
BIN = pathlib.Path(sys.executable).parent
pytestmark = pytest.mark.skipif(
    not WHEEL, reason="SNAPCELL_WHEEL is not set: scripts/test-python sets it to the wheel "
    "scripts/build-wheel made")


# What the wheel's binaries may need from the system: glibc's libraries (manylinux_2_28's
# policy), nothing else (no libpython: the guest module runs in the user's interpreter).
# librt: the guest module's POSIX timers (timer_create, in librt before glibc 2.34).
SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "libanl.so.1",
                    "librt.so.1", "ld-linux-x86-64.so.2"}


def test_the_wheel_is_the_portable_one():
    name = os.path.basename(WHEEL)
    assert re.fullmatch(r"snapcell-[0-9.]+-cp310-abi3-manylinux_2_28_x86_64\.whl", name), name


def test_its_binaries_need_only_glibc_2_28(tmp_path):
    """Every library linked in (nothing grafted beside the package, which the helper could not
    reach as the sandbox's uid), no glibc symbol newer than 2.28, and position-independent
    binaries (the executables as the system compiler's build makes them)."""
    with zipfile.ZipFile(WHEEL) as wheel:
        assert not [n for n in wheel.namelist() if ".libs/" in n]
        wheel.extractall(tmp_path)
    binaries = [p for p in (tmp_path / "snapcell").iterdir()
                if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"]
    assert {"snapcell", "snapcell-cell", "_native.abi3.so"} <= {p.name for p in binaries}
    for binary in binaries:
        dynamic = subprocess.run(["readelf", "-d", "-W", str(binary)], capture_output=True,
                                 text=True, check=True).stdout
        needed = set(re.findall(r"\(NEEDED\).*\[(.+)\]", dynamic))
        assert needed <= SYSTEM_LIBRARIES, \
            (binary.name, needed)
        header = subprocess.run(["readelf", "-h", str(binary)], capture_output=True, text=True,
                                check=True).stdout
        assert re.search(r"Type:\s+DYN ", header), (binary.name, "not position-independent")
        versions = subprocess.run(["readelf", "-V", "-W", str(binary)], capture_output=True,
                                  text=True, check=True).stdout
        glibc = {tuple(map(int, v.split("."))) for v in re.findall(r"GLIBC_([0-9.]+)", versions)}
        assert glibc and max(glibc) <= (2, 28), (binary.name, max(glibc))


@pytest.fixture(scope="module")
def uv_env(tmp_path_factory):
    """uv's cache and tool directories of this module's own, the test's Python as the tool's
    interpreter, nothing downloaded but packages (the wheel's dependencies, from PyPI)."""
    home = tmp_path_factory.mktemp("uv")
    return {**os.environ, "UV_CACHE_DIR": str(home / "cache"),
            "UV_TOOL_DIR": str(home / "tools"), "UV_PYTHON": sys.executable,
            "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1",
            # Another snapcell's helper in the user's environment is not the packaged one's
            # business: the console script always runs the helper beside it.
            "SNAPCELL_HELPER": "/nonexistent/snapcell-cell", "SNAPCELL_PYTHON": ""}


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh venv of this Python with the wheel installed by pip (dependencies from PyPI)."""
    path = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    subprocess.run([str(path / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                    WHEEL], check=True)
    return path


def mcp_session(command, args, env):
    """Lists the server's tools and runs one execute_code, through the official SDK client."""
    async def go():
        params = StdioServerParameters(command=command, args=args, env=env)
        async with Client(params) as client:
            tools = (await client.list_tools()).tools
            result = await client.call_tool(
                "execute_code", {"code": "import sys; print(6 * 7, tuple(sys.version_info[:2]))"})
            return tools, result

    return asyncio.run(asyncio.wait_for(go(), 120))


def check_session(tools, result):
    """The cells run the Python that runs the console script (its base interpreter: this
    test's own version), not the CLI's default python3 on PATH."""
    assert [t.name for t in tools] == ["execute_code"]
    assert result.is_error is False, result
    assert [c.text for c in result.content if c.type == "text"] == \
        [f"42 {tuple(sys.version_info[:2])}\n"]


def test_uvx_from_the_wheel_serves_mcp(uv_env):
    uvx = str(BIN / "uvx")
    # The first start installs the tool's environment; a version first keeps that out of the
    # MCP client's handshake time.
    version = subprocess.run([uvx, "--from", WHEEL, "snapcell", "version"], env=uv_env,
                             capture_output=True, text=True, timeout=300)
    assert version.returncode == 0, version.stderr
    assert re.fullmatch(r"snapcell [0-9.]+\n", version.stdout)
    check_session(*mcp_session(uvx, ["--from", WHEEL, "snapcell", "mcp"], uv_env))


def test_venv_console_script_serves_mcp(venv):
    env = {**os.environ, "SNAPCELL_HELPER": "/nonexistent/snapcell-cell", "SNAPCELL_PYTHON": ""}
    check_session(*mcp_session(str(venv / "bin" / "snapcell"), ["mcp"], env))


def test_python_m_snapcell_runs_the_packaged_cli(venv):
    doctor = subprocess.run([str(venv / "bin" / "python"), "-m", "snapcell", "doctor"],
                            capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stderr
    version = subprocess.run([str(venv / "bin" / "snapcell"), "--version"], capture_output=True,
                             text=True, timeout=60)
    import snapcell
    assert version.stdout == f"snapcell {snapcell.__version__}\n"


def test_console_script_without_its_binary_says_so(venv):
    """A damaged install (the binary gone) is named, not a traceback."""
    site = next((venv / "lib").glob("python3*/site-packages/snapcell"))
    (site / "snapcell").rename(site / "snapcell.moved")
    try:
        run = subprocess.run([str(venv / "bin" / "snapcell"), "version"], capture_output=True,
                             text=True, timeout=60)
    finally:
        (site / "snapcell.moved").rename(site / "snapcell")
    assert run.returncode == 1
    assert run.stderr == f"snapcell: cannot run {site / 'snapcell'}: No such file or directory\n"
