"""snapcell.Sandbox: the framework-neutral Python API over real sandboxes."""

import asyncio
import json
import os
import pathlib
import subprocess
import threading
import time
from typing import Literal, Optional

import pydantic
import pytest

import snapcell
from snapcell import _sandbox
from conftest import descendants


def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def test_run_with_a_tool_and_an_artifact():
    with snapcell.Sandbox(tools=[add], timeout=10) as sb:
        r = sb.run('open("/output/r.txt", "w").write("hi")\nprint(call_tool("add", a=20, b=22))')
    assert r.status == "ok" and r.ok
    assert r.stdout == "42\n"
    assert [(a.path, a.media_type, a.data) for a in r.artifacts] == [("r.txt", "text/plain", b"hi")]
    assert r.artifacts[0].sandbox_path == "/output/r.txt"
    assert [(c.name, c.ok) for c in r.tool_calls] == [("add", True)]
    assert r.isolation in ("namespaces", "cgroups", "rlimits")
    assert r.wall_time > 0 and r.peak_rss > 0
    assert (r.peak_memory > 0) == (r.isolation == "cgroups")


def test_result_value_is_the_last_expression_and_says_why_it_is_absent():
    cases = [
        ("1+1", "ok", 2, None),
        ("print('hi')\n{'a': (1, 2.5), 'b': [None, True]}", "ok", {"a": [1, 2.5], "b": [None, True]}, None),
        ("2**100", "ok", 2**100, None),
        ("x = 3", "ok", None, "no_expression"),
        ("None", "ok", None, "none"),
        ("object()", "ok", None, "not_json"),
        ("list(range(100000))", "ok", None, "too_large"),
        ("print('before')\n1/0", "error", None, "not_evaluated"),
    ]
    with snapcell.Sandbox(timeout=10) as sb:
        for code, status, value, absent in cases:
            r = sb.run(code)
            assert (r.status, r.value, r.value_absent) == (status, value, absent), (code, r)
            if absent is None:
                assert r.value_text == "value: " + json.dumps(value)
            elif absent in ("not_json", "too_large"):
                assert r.value_text.startswith("value: not shown") and "JSON" in r.value_text
            else:
                assert r.value_text is None
        r = sb.run("print('hi')\n'x' * 10")
        assert r.stdout == "hi\n" and r.value == "x" * 10
        assert sb.run(f"'x' * {snapcell.VALUE_MAX_BYTES - 2}").value_absent is None
        assert sb.run(f"'x' * {snapcell.VALUE_MAX_BYTES - 1}").value_absent == "too_large"
        with sb.session() as s:
            assert s.run("y = 40").value_absent == "no_expression"
            assert s.run("y + 2").value == 42
    assert snapcell.VALUE_MAX_BYTES == 262144


def mul(a: int, b: int) -> int:
    """Multiplies two integers."""
    return a * b


def _template(sb):
    """The template's pid and start time: the same process, or a new one."""
    pid = sb._native.stats()["template_pid"]
    return pid, pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_run_tools_are_added_for_that_run_only_without_a_new_template():
    with snapcell.Sandbox(tools=[add], timeout=10) as sb:
        template = _template(sb)
        r = sb.run("print(tools.mul(a=6, b=7), call_tool('mul', a=2, b=3), tools.add(a=1, b=2))",
                   tools=[mul])
        assert (r.status, r.stdout) == ("ok", "42 6 3\n"), r
        assert [c.name for c in r.tool_calls] == ["mul", "mul", "add"]
        # a single tool, and a snapcell.Tool
        assert sb.run("tools.mul(a=2, b=2)", tools=mul).value == 4
        assert sb.run("tools.times(a=2, b=5)", tools=snapcell.Tool(mul, name="times")).value == 10
        # checked like the sandbox's: a string is not an int
        r = sb.run("tools.mul(a='x', b=2)", tools=[mul])
        assert r.status == "error" and "ToolError" in r.stderr
        # gone in the next run
        r = sb.run("print(hasattr(tools, 'mul'))\ncall_tool('mul', a=1, b=2)")
        assert r.stdout == "False\n" and "unknown tool 'mul'" in r.stderr
        with pytest.raises(ValueError, match="tool add is already one of the sandbox's tools"):
            sb.run("1", tools=[add])
        assert _template(sb) == template


def test_run_tools_async_and_in_a_session():
    async def amul(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a * b

    async def go(sb):
        return await sb.run_async("tools.amul(a=3, b=3)", tools=[amul])

    with snapcell.Sandbox(timeout=10) as sb:
        assert asyncio.run(go(sb)).value == 9
        with sb.session() as s:
            assert s.run("x = tools.mul(a=4, b=5)\nx", tools=[mul]).value == 20
            assert s.run("[x, hasattr(tools, 'mul')]").value == [20, False]


def test_run_files_are_at_input_for_that_run_only_without_a_new_template(tmp_path, work_tmp):
    ws = work_tmp / "ws"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / "a.csv").write_text("from workspace")
    host = work_tmp / "host.bin"
    host.write_bytes(b"\x00from the host")
    host.chmod(0o644)
    read = ("import os\nprint(open('/input/q.txt').read(), open('/input/data/b.csv').read(),"
            " open('/input/data/a.csv').read(), repr(open('/input/h.bin','rb').read()),"
            " sorted(os.listdir('/input/data')))")
    with snapcell.Sandbox(workspace=ws, timeout=10) as sb:
        template = _template(sb)
        r = sb.run(read, files={"q.txt": "question", "data/b.csv": b"b", "h.bin": host})
        assert (r.status, r.stdout) == ("ok", "question b from workspace b'\\x00from the host'"
                                              " ['a.csv', 'b.csv']\n"), r
        # pairs, and any buffer; read-only
        r = sb.run("open('/input/m', 'a')", files=[("m", memoryview(b"xy"))])
        assert r.status == "error" and "Read-only file system" in r.stderr, r
        # gone in the next run
        assert sb.run("import os; sorted(os.listdir('/input'))").value == ["data"]
        # the C library's rules: a clash with the workspace, a bad name, a link
        with pytest.raises(ValueError, match="/input/data/a.csv is already the workspace's"):
            sb.run("1", files={"data/a.csv": b""})
        with pytest.raises(ValueError, match="'..' part"):
            sb.run("1", files={"../x": b""})
        link = work_tmp / "link"
        link.symlink_to(host)
        with pytest.raises(ValueError, match="a symbolic link"):
            sb.run("1", files={"l": link})
        with pytest.raises(FileNotFoundError):
            sb.run("1", files={"l": work_tmp / "absent"})
        with pytest.raises(TypeError, match="bytes, str or a path"):
            sb.run("1", files={"n": 3})
        assert _template(sb) == template

        async def go():
            return await sb.run_async("open('/input/x').read()", files={"x": "async"})

        assert asyncio.run(go()).value == "async"
        with sb.session() as s:
            with pytest.raises(ValueError, match="a session's runs take no files"):
                s.run("1", files={"x": b""})


def test_run_tools_of_a_paused_run_live_until_the_decision():
    with snapcell.Sandbox(timeout=10) as sb:
        run_tools = _sandbox._run_tools([mul], True)
        run_tools.set_tool_decision("mul", True)
        r = snapcell.Result._from_native(sb._native.run("tools.mul(a=6, b=7)", None, run_tools), sb)
        _sandbox._keep(r, run_tools)
        del run_tools
        import gc
        gc.collect()
        assert r.status == "paused" and r.pending.name == "mul"
        assert sb.resume(r, approve=True).value == 42


def test_limits_are_keywords_and_name_the_cause():
    with snapcell.Sandbox(timeout=0.5) as sb:
        r = sb.run("while True: pass")
    assert r.status == "timeout" and "wall" in r.limits_hit
    with snapcell.Sandbox(memory_limit=200 * 1024 * 1024) as sb:
        r = sb.run("x = bytearray(400 * 1024 * 1024)")
    assert r.status == "memory"


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"timeout_ms": 5}, TypeError),
        ({"memory_limit": True}, TypeError),
        ({"timeout": -1}, ValueError),
        ({"processes": 1.5}, TypeError),
        ({"workspace": "/nonexistent/snapcell"}, (FileNotFoundError, ValueError)),
        ({"mounts": [("/nonexistent/snapcell", "data")]}, (FileNotFoundError, ValueError)),
        ({"mounts": [("/etc/hostname", "../escape")]}, ValueError),
        ({"allowed_domains": [""]}, ValueError),
    ],
)
def test_bad_configuration_raises_before_anything_runs(kwargs, exc):
    before = descendants()
    with pytest.raises(exc):
        snapcell.Sandbox(**kwargs)
    assert descendants() == before


def test_schema_derived_from_annotations():
    class Point(pydantic.BaseModel):
        x: int
        y: int

    def plot(points: list[Point], style: Literal["line", "dot"] = "dot", title: Optional[str] = None) -> dict:
        return {"n": len(points), "sum": sum(p.x + p.y for p in points), "style": style, "title": title}

    tool = snapcell.Tool(plot)
    assert tool.schema["properties"]["style"]["enum"] == ["line", "dot"]
    with snapcell.Sandbox(tools=[tool]) as sb:
        r = sb.run('print(call_tool("plot", points=[{"x": 1, "y": 2}, {"x": 3, "y": 4}], style="line"))')
        assert r.stdout == "{'n': 2, 'sum': 10, 'style': 'line', 'title': None}\n", r.stderr
        r = sb.run('''
try:
    call_tool("plot", points=[{"x": "a", "y": 2}])
except ToolError as e:
    print("refused:", e)''')
        assert r.stdout.startswith("refused:") and "x" in r.stdout


def test_a_tool_whose_schema_cannot_be_derived_is_a_type_error():
    def bad(*values):
        return 0

    with pytest.raises(TypeError, match="bad"):
        snapcell.Sandbox(tools=[bad])

    class Opaque:
        pass

    def opaque(thing: Opaque) -> int:
        return 0

    with pytest.raises(TypeError, match="opaque"):
        snapcell.Tool(opaque)


def test_tool_errors_reach_the_code_with_their_message():
    def fails(reason: str) -> None:
        raise RuntimeError(f"refused: {reason}")

    with snapcell.Sandbox(tools=[fails]) as sb:
        r = sb.run('''
try:
    call_tool("fails", reason="no quota")
except ToolError as e:
    print(e)''')
    assert r.stdout == "refused: no quota\n"


def test_dicts_stay_dicts_both_ways():
    def echo(payload: dict) -> dict:
        return {"got": payload, "type": type(payload).__name__}

    with snapcell.Sandbox(tools=[echo]) as sb:
        r = sb.run('v = call_tool("echo", payload={"a": [1, 2]}); print(type(v).__name__, v)')
    assert r.stdout == "dict {'got': {'a': [1, 2]}, 'type': 'dict'}\n"


def test_async_tool_runs_on_the_callers_loop():
    async def main():
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        seen = {}

        async def wait_for_signal() -> str:
            seen["loop"] = asyncio.get_running_loop()
            await ready.wait()
            return "signalled"

        with snapcell.Sandbox(tools=[wait_for_signal]) as sb:
            task = asyncio.create_task(sb.run_async('print(call_tool("wait_for_signal"))'))
            while "loop" not in seen:
                await asyncio.sleep(0.01)
            ready.set()
            r = await asyncio.wait_for(task, 30)
        assert seen["loop"] is loop
        return r

    r = asyncio.run(main())
    assert r.stdout == "signalled\n"


def test_run_async_keeps_the_loop_running():
    async def main():
        ticks = 0
        stop = False

        async def ticker():
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0.01)

        with snapcell.Sandbox() as sb:
            t = asyncio.create_task(ticker())
            r = await sb.run_async("import time; time.sleep(0.5); print('done')")
            stop = True
            await t
        return r, ticks

    r, ticks = asyncio.run(main())
    assert r.stdout == "done\n"
    assert ticks >= 10


def test_cancelling_run_async_kills_the_cell():
    async def main():
        with snapcell.Sandbox(timeout=60) as sb:
            task = asyncio.create_task(sb.run_async("while True: pass"))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return await sb.run_async("print('next')")

    assert asyncio.run(main()).stdout == "next\n"


def test_many_threads_run_at_once_on_one_sandbox():
    barrier = threading.Barrier(8, timeout=30)

    def meet() -> int:
        return barrier.wait()

    with snapcell.Sandbox(tools=[meet]) as sb:
        results = [None] * 8

        def worker(i):
            results[i] = sb.run('print(call_tool("meet"))')

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert sorted(int(r.stdout) for r in results) == list(range(8))


def test_sessions_snapshots_and_branches():
    with snapcell.Sandbox() as sb:
        with sb.session() as s:
            s.run("x = 1")
            snap = s.snapshot()
            s.run("x = 2")
            assert s.run("print(x)").stdout == "2\n"
            s.restore(snap)
            assert s.run("print(x)").stdout == "1\n"
            with snap.session() as branch:
                branch.run("x += 10")
                assert branch.run("print(x)").stdout == "11\n"
            assert s.run("print(x)").stdout == "1\n"
            snap.close()


def test_close_leaves_no_process_and_no_directory(work_tmp, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("x")
    sb = snapcell.Sandbox(timeout=0.5, workspace=str(ws))
    assert sb.run("while True: pass").status == "timeout"
    assert descendants()
    sb.close()
    sb.close()
    assert descendants() == set()
    assert list(work_tmp.iterdir()) == []


def test_garbage_collection_ends_the_sandbox(work_tmp):
    import gc

    sb = snapcell.Sandbox()
    sb.run("pass")
    del sb
    gc.collect()
    deadline = time.monotonic() + 10
    while descendants() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert descendants() == set()
    assert list(work_tmp.iterdir()) == []


def test_network_entries_are_normalised_and_described():
    # The map keeps the lookup off DNS; its private address is refused like a resolved one.
    with snapcell.Sandbox(allowed_domains=["https://API.example.com/v1", ("127.0.0.1:8080", "get")],
                          host_map={"api.example.com": "10.0.0.1"}) as sb:
        text = sb.describe()
        assert "api.example.com" in text and "127.0.0.1:8080" in text and "GET" in text
        r = sb.run("import urllib.request\nurllib.request.urlopen('https://api.example.com/v1')")
    assert r.status == "error"
    assert "api.example.com resolves to 10.0.0.1, a private address" in r.stderr


def test_network_entries_take_the_new_forms_and_headers(monkeypatch):
    monkeypatch.setenv("SC_PY_TOKEN", "py-s3cret")
    entries = [
        "*.Example.org:8443",
        ("[::1]:8080", ["get", "POST"]),
        snapcell.AllowedTarget("https://api.example.com/v1", "get",
                               headers={"Authorization": "Bearer ${env:SC_PY_TOKEN}"}),
    ]
    cfg, _ = snapcell._sandbox.build_config(allowed_domains=entries)
    assert cfg.allowed() == [
        ("*.example.org:8443", None),
        ("[::1]:8080", ("GET", "POST")),
        ("https://api.example.com/v1", ("GET",)),
    ]
    text = cfg.describe()
    assert "- https://api.example.com/v1: GET (the host adds the Authorization header)" in text
    assert "py-s3cret" not in text
    for bad, exc in [("127.1", ValueError), ("evil\\@allowed", ValueError),
                     (snapcell.AllowedTarget("x.example", headers={"Host": "y"}), ValueError),
                     (snapcell.AllowedTarget("x.example", headers={"X-A": "${env:SC_PY_UNSET}"}), ValueError),
                     (snapcell.AllowedTarget("x.example", headers={"X-A": 1}), TypeError)]:
        with pytest.raises(exc):
            snapcell._sandbox.build_config(allowed_domains=[bad])
    with pytest.raises(KeyError):
        cfg.allow_header("y.example", "X-A", "1")


def test_probe_and_version():
    assert snapcell.__version__.count(".") == 2
    assert snapcell.probe()["level"] in ("namespaces", "cgroups", "rlimits")


def test_venv_and_preload_keywords(tmp_path):
    import subprocess

    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "vmod.py").write_text("WHERE = 'venv'\n")
    (site / "extra.pth").write_text("import os; os.environ['PTH'] = 'ran'\n")
    for p in [tmp_path, *tmp_path.rglob("*")]:
        if not p.is_symlink():  # bin/python links to /usr/bin/python3.11
            p.chmod(0o755 if p.is_dir() else 0o644)
    with snapcell.Sandbox(venv=venv, preload=["vmod"]) as sb:
        r = sb.run("import os, sys; print('vmod' in sys.modules, sys.modules['vmod'].WHERE, "
                   "os.environ['PTH'])")
    assert (r.status, r.stdout) == ("ok", "True venv ran\n"), r.stderr
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.9.18\n")
    with pytest.raises(ValueError, match="made by Python 3.9.18: snapcell runs CPython 3.10 or newer"):
        snapcell.Sandbox(venv=venv)
    with pytest.raises(ValueError, match="not a dotted module name"):
        snapcell.Sandbox(preload=["a b"])
    with pytest.raises(snapcell.SetupError, match="preload no_such_mod: ModuleNotFoundError"):
        snapcell.Sandbox(preload="no_such_mod")


def test_warmup_keyword_primes_every_run_and_its_errors_are_setup_errors():
    with snapcell.Sandbox(warmup="import json\njson.primed = 'yes'\nprint('hidden')") as sb:
        for _ in range(2):
            r = sb.run("import json; print(json.primed); json.primed = 'changed'")
            assert (r.status, r.stdout, r.stderr) == ("ok", "yes\n", "")
    with pytest.raises(snapcell.SetupError,
                       match=r"warm-up: KeyError: 'x' \(at <warmup>:2 `\{\}\['x'\]`\)"):
        snapcell.Sandbox(warmup="y = 1\n{}['x']\n")
    with pytest.raises(snapcell.SetupError, match="warm-up: leaves descriptor"):
        snapcell.Sandbox(warmup="import os, sys\nsys.f = open(os.__file__)")
    with pytest.raises(snapcell.SetupError, match="warm-up: leaves threads running"):
        snapcell.Sandbox(warmup="import threading, time\n"
                                "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()")
    with pytest.raises(ValueError, match="the limit is 65536"):
        snapcell.Sandbox(warmup="#" * 65537)
    with pytest.raises(ValueError, match="NUL"):
        snapcell.Sandbox(warmup="x = 1\0")
    with pytest.raises(TypeError, match=r"wants a str \(Python code\) or None"):
        snapcell.Sandbox(warmup=b"x = 1")


def test_uid_range_is_checked_and_a_held_range_is_a_setup_error():
    for bad, error in (((0, 1), ValueError), ((60000, 10000), ValueError),
                       ((-1, 1), OverflowError), ((1, 2**32), OverflowError)):
        with pytest.raises(error):
            snapcell.Sandbox(uid_range=bad)
    with snapcell.Sandbox(uid_range=(2100000300, 1)) as sb:
        assert sb.run("print(1)").stdout == "1\n"
        if os.geteuid() == 0:
            with pytest.raises(snapcell.SetupError, match="2100000300..2100000300"):
                snapcell.Sandbox(uid_range=(2100000300, 1))
    with snapcell.Sandbox(uid_range=(2100000300, 1)) as sb:  # freed: free again
        assert sb.run("print(2)").stdout == "2\n"


def test_a_helper_that_cannot_start_raises_with_its_own_words(monkeypatch, work_tmp):
    """What the dynamic loader says when the helper cannot start (its libpython missing) is in
    the error: a stand-in helper (tests/c/dying_helper.c, built here) says it and exits 127."""
    root = pathlib.Path(__file__).resolve().parents[2]
    helper = work_tmp / "snapcell-cell"
    subprocess.run([os.environ.get("CC", "cc"), "-DSC_DYING_LOADER", f"-I{root / 'src'}",
                    f"-I{root / 'include'}", str(root / "tests/c/dying_helper.c"), "-o",
                    str(helper)], check=True)
    monkeypatch.setattr(_sandbox, "_HELPER", str(helper))
    with pytest.raises(snapcell.SetupError) as e:
        snapcell.Sandbox()
    assert e.value.name == "SNAPCELL_E_HELPER"
    assert str(e.value) == (f"helper {helper} exited with status 127 before its greeting: "
                            "snapcell-cell: error while loading shared libraries: "
                            "libpython3.11.so.1.0: cannot open shared object file: "
                            "No such file or directory")
