"""snapcell._native, the C binding, against the installed wheel: every function and method,
the error mapping, tool callbacks and the GIL, concurrency, sessions, and what is left behind
(processes, work directories, memory) once objects are closed or collected."""

import gc
import importlib.metadata
import json
import os
import re
import sys
import threading
import time

import pytest

from conftest import descendants, native_config
from snapcell import _native as native

LIMITS = [
    "wall_ms", "cpu_ms", "memory_bytes", "processes", "file_bytes", "tmp_bytes", "stdout_bytes",
    "stderr_bytes", "open_files", "output_files", "output_file_bytes", "output_total_bytes",
    "output_depth", "output_path_bytes",
]

RESULT_KEYS = {
    "status", "exit_code", "term_signal", "limits_hit", "stdout", "stderr", "stdout_truncated",
    "stderr_truncated", "wall_us", "cpu_us", "peak_memory_bytes", "peak_rss_bytes", "isolation",
    "tool_calls", "tool_calls_dropped", "artifacts", "skipped", "skipped_count", "output_limits_hit",
    "network_events", "network_limits_hit", "summary", "pending", "decisions", "value_json",
    "value_state", "value_text",
}


def add_json(args):
    a = json.loads(args)
    return json.dumps(a["a"] + a["b"])


@pytest.fixture
def sandbox():
    """A sandbox from a config with the add tool, closed after the test."""
    made = []

    def make(cfg=None):
        if cfg is None:
            cfg = native_config()
            cfg.add_tool("add", "Adds a and b.", None, False, add_json)
        made.append(native.Sandbox(cfg))
        return made[-1]

    yield make
    for sb in made:
        sb.close()


def rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


# ---- module functions ----


def test_version_is_the_package_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", native.version())
    assert native.version() == importlib.metadata.version("snapcell")


def test_normalize_mount_path():
    assert native.normalize_mount_path(" data\\x/./y ") == "/input/data/x/y"
    assert native.normalize_mount_path("input/a") == "/input/a"
    for bad in ("../etc", "a/../../b", "/input", "."):
        with pytest.raises(ValueError):
            native.normalize_mount_path(bad)


def test_tree_signature_changes_with_a_file(tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "a.txt").write_text("one")
    first = native.tree_signature(str(tmp_path / "t"))
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert native.tree_signature(tmp_path / "t") == first  # os.PathLike too
    (tmp_path / "t" / "a.txt").write_text("three")
    assert native.tree_signature(str(tmp_path / "t")) != first
    missing = str(tmp_path / "missing")
    with pytest.raises(FileNotFoundError) as e:
        native.tree_signature(missing)
    assert missing in str(e.value)


def test_probe_reports_every_mechanism():
    p = native.probe()
    assert p["level"] in ("none", "rlimits", "namespaces", "cgroups")
    assert len(p["mechanisms"]) == 10
    for m in p["mechanisms"]:
        assert set(m) == {"name", "available", "used", "detail"}
        assert isinstance(m["name"], str) and m["name"]
        assert isinstance(m["available"], bool) and isinstance(m["used"], bool)
        assert isinstance(m["detail"], str)
    assert "user namespace" in [m["name"] for m in p["mechanisms"]]


def test_error_types():
    assert issubclass(native.SnapcellError, RuntimeError)
    assert issubclass(native.SetupError, native.SnapcellError)
    assert native.SnapcellError("x").code is None


# ---- Config ----


def test_limits_round_trip_and_refuse_bad_values():
    cfg = native_config()
    defaults = {name: cfg.get_limit(name) for name in LIMITS}
    for name in LIMITS:  # every default is in range, and so is one less than it
        cfg.set_limit(name, defaults[name] - 1)
        assert cfg.get_limit(name) == defaults[name] - 1
    cfg.set_limit("wall_ms", 1000)
    assert native_config().get_limit("wall_ms") == 30000
    with pytest.raises(ValueError) as e:
        cfg.set_limit("wall", 5)
    assert "wall_ms" in str(e.value) and "output_path_bytes" in str(e.value)
    with pytest.raises(ValueError):
        cfg.get_limit("nope")
    with pytest.raises(TypeError):
        cfg.set_limit("wall_ms", True)
    with pytest.raises(TypeError):
        cfg.set_limit("wall_ms", 1.5)
    for bad in (0, -1, 2**70, 10**15):
        with pytest.raises(ValueError, match="wall_ms"):
            cfg.set_limit("wall_ms", bad)
    assert cfg.get_limit("wall_ms") == 1000


def test_env_and_python_path_reach_the_code(sandbox, tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "helper_mod.py").write_text("VALUE = 'from the host'\n")
    cfg = native_config()
    cfg.set_env("GREETING", "héllo")
    cfg.set_env("GREETING", "hello")  # replaces
    cfg.add_python_path(str(lib))
    with pytest.raises(ValueError):
        cfg.set_env("A=B", "x")
    with pytest.raises(ValueError):
        cfg.set_env("", "x")
    with pytest.raises(ValueError):
        cfg.add_python_path("relative/dir")
    r = sandbox(cfg).run("import os, helper_mod; print(os.environ['GREETING'], helper_mod.VALUE)")
    assert r["status"] == "ok", r["stderr"]
    assert r["stdout"] == "hello from the host\n"


def test_workspace_resolves_and_names_a_missing_path(tmp_path):
    (tmp_path / "ws").mkdir()
    os.symlink(tmp_path / "ws", tmp_path / "link")
    cfg = native_config()
    assert cfg.workspace is None
    cfg.set_workspace(str(tmp_path / "link"))
    assert cfg.workspace == os.path.realpath(tmp_path / "ws")
    missing = str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError) as e:
        cfg.set_workspace(missing)
    assert missing in str(e.value) and e.value.filename == missing
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        cfg.set_workspace(str(tmp_path / "file"))
    assert cfg.workspace == os.path.realpath(tmp_path / "ws")  # a failed call changes nothing
    cfg.set_workspace(None)
    assert cfg.workspace is None


def test_mounts_in_order_with_replace_and_remove(sandbox, tmp_path):
    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "b.txt").write_text("B")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "w.txt").write_text("W")
    cfg = native_config()
    cfg.set_workspace(str(tmp_path / "ws"))
    cfg.add_mount(str(tmp_path / "a.txt"), "data/one.txt")
    cfg.add_mount(str(tmp_path / "b.txt"), "/input/two.txt")
    cfg.add_mount(str(tmp_path / "b.txt"), "data\\one.txt")  # same path: replaced in place
    assert cfg.mounts() == [
        (str(tmp_path / "b.txt"), "/input/data/one.txt"),
        (str(tmp_path / "b.txt"), "/input/two.txt"),
    ]
    cfg.remove_mount("two.txt")
    with pytest.raises(KeyError):
        cfg.remove_mount("two.txt")
    with pytest.raises(ValueError):
        cfg.remove_mount("../x")
    missing = str(tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError) as e:
        cfg.add_mount(missing, "m.txt")
    assert missing in str(e.value)
    with pytest.raises(ValueError):
        cfg.add_mount(str(tmp_path / "a.txt"), "../escape")
    r = sandbox(cfg).run("print(open('/input/data/one.txt').read(), open('/input/w.txt').read())")
    assert r["stdout"] == "B W\n", r["stderr"]


def test_tools_listed_replaced_and_removed():
    cfg = native_config()
    schema = '{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}'
    cfg.add_tool("first", "The first.", schema, True, add_json)
    cfg.add_tool("second", None, None, False, add_json)
    cfg.add_tool("first", "Replaced.", None, False, add_json)  # keeps its place
    tools = cfg.tools()
    assert [(t[0], t[1], t[3]) for t in tools] == [
        ("first", "Replaced.", False),
        ("second", "", False),
    ]
    assert json.loads(tools[0][2]) == {"type": "object"}
    cfg.add_tool("first", "Again.", schema, True, add_json)
    assert json.loads(cfg.tools()[0][2]) == json.loads(schema) and cfg.tools()[0][3] is True
    cfg.remove_tool("second")
    with pytest.raises(KeyError) as e:
        cfg.remove_tool("second")
    assert e.value.args == ("second",)
    for name in ("not an identifier", "a/b", "x" * 129):
        with pytest.raises(ValueError):
            cfg.add_tool(name, "", None, False, add_json)
    with pytest.raises(ValueError):
        cfg.add_tool("bad_schema", "", "[1, 2]", False, add_json)
    with pytest.raises(ValueError):
        cfg.add_tool("bad_json", "", "{", False, add_json)
    with pytest.raises(TypeError):
        cfg.add_tool("not_callable", "", None, False, "nope")
    assert [t[0] for t in cfg.tools()] == ["first"]


def test_require_isolation():
    cfg = native_config()
    with pytest.raises(ValueError, match="namespaces"):
        cfg.require_isolation("strong")
    cfg.require_isolation("cgroups")
    if native.probe()["level"] == "cgroups":  # root: a memory cgroup per cell
        sb = native.Sandbox(cfg)
        assert sb.isolation == "cgroups"
        sb.close()
        return
    with pytest.raises(native.SetupError) as e:
        native.Sandbox(cfg)
    assert e.value.name == "SNAPCELL_E_ISOLATION" and e.value.code == -5001
    assert "cgroups" in str(e.value)
    assert isinstance(e.value, native.SnapcellError) and isinstance(e.value, RuntimeError)


def test_constructor_arguments():
    with pytest.raises(TypeError):
        native.Config(1)
    with pytest.raises(TypeError):
        native.Sandbox("not a config")
    with pytest.raises(TypeError):
        native.Session()
    with pytest.raises(TypeError):
        native.Snapshot()


# ---- runs ----


def test_run_result_has_every_field(sandbox):
    sb = sandbox()
    assert sb.isolation in ("rlimits", "namespaces", "cgroups")
    r = sb.run('import sys\nprint(call_tool("add", a=20, b=22))\nprint("e", file=sys.stderr)')
    assert set(r) == RESULT_KEYS
    assert r["status"] == "ok" and r["exit_code"] == 0 and r["term_signal"] == 0
    assert r["stdout"] == "42\n" and r["stderr"] == "e\n"
    assert r["limits_hit"] == [] and r["output_limits_hit"] == []
    assert r["stdout_truncated"] is False and r["stderr_truncated"] is False
    assert r["wall_us"] > 0 and r["peak_rss_bytes"] > 0 and isinstance(r["cpu_us"], int)
    # what the host was charged is known only where a memory cgroup measured it
    assert (r["peak_memory_bytes"] > 0) == (r["isolation"] == "cgroups")
    assert r["isolation"] == sb.isolation
    assert len(r["tool_calls"]) == 1
    name, args_bytes, duration_us, ok = r["tool_calls"][0]
    assert (name, args_bytes, ok) == ("add", len('{"a": 20, "b": 22}'), True)
    assert isinstance(duration_us, int)
    assert r["tool_calls_dropped"] == 0 and r["artifacts"] == [] and r["skipped"] == []
    assert r["skipped_count"] == 0 and r["network_events"] == [] and r["network_limits_hit"] == []
    # print(...) is the last expression: its value is None
    assert (r["value_json"], r["value_state"], r["value_text"]) == (None, "none", None)
    r = sb.run("[20, 22]")
    assert (r["value_json"], r["value_state"], r["value_text"]) == ("[20, 22]", "present", "value: [20, 22]")


def test_statuses_and_limits(sandbox):
    cfg = native_config()
    cfg.set_limit("wall_ms", 500)
    cfg.set_limit("stdout_bytes", 100)
    sb = sandbox(cfg)
    r = sb.run("raise SystemExit(3)")
    assert (r["status"], r["exit_code"]) == ("error", 3)
    r = sb.run("1/0")
    assert r["status"] == "error" and "ZeroDivisionError" in r["stderr"]
    r = sb.run("while True: pass")
    assert r["status"] == "timeout" and "wall" in r["limits_hit"]
    r = sb.run("print('x' * 1000)")
    assert r["status"] == "output-limit" and r["stdout_truncated"] and "stdout" in r["limits_hit"]
    r = sb.run("import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe'); sys.stdout.flush()")
    assert r["stdout"] == "ok \ufffd\ufffd"
    r = sb.run("print('a\\0b')")  # code and output may hold NULs
    assert r["stdout"] == "a\0b\n"


def test_tool_errors_reach_the_code_as_tool_error(sandbox):
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no str")

    def failing(args):
        raise LookupError(f"no rate for {json.loads(args)['currency']}")

    def unprintable(args):
        raise Unprintable()

    def wrong_type(args):
        return 42

    cfg = native_config()
    cfg.add_tool("failing", "", None, False, failing)
    cfg.add_tool("unprintable", "", None, False, unprintable)
    cfg.add_tool("wrong_type", "", None, False, wrong_type)
    cfg.add_tool("answer", "", None, False, lambda args: '{"nested": [1, 2.5, null, "x"]}')
    code = """
def attempt(name, **kw):
    try:
        return ("ok", call_tool(name, **kw))
    except ToolError as e:
        return ("ToolError", str(e))
print(repr([attempt("failing", currency="XYZ"), attempt("unprintable"), attempt("wrong_type"),
            attempt("answer"), attempt("missing")]))
"""
    r = sandbox(cfg).run(code)
    assert r["status"] == "ok", r["stderr"]
    got = eval(r["stdout"])
    assert got[0] == ("ToolError", "no rate for XYZ")
    assert got[1] == ("ToolError", "Unprintable")
    assert got[2][0] == "ToolError" and "int" in got[2][1] and "str" in got[2][1]
    assert got[3] == ("ok", {"nested": [1, 2.5, None, "x"]})
    assert got[4][0] == "ToolError" and "missing" in got[4][1]
    assert [(c[0], c[3]) for c in r["tool_calls"]] == [
        ("failing", False), ("unprintable", False), ("wrong_type", False), ("answer", True),
        ("missing", False),
    ]


def test_a_tool_error_leaves_no_exception_behind(sandbox):
    def failing(args):
        raise ValueError("boom")

    cfg = native_config()
    cfg.add_tool("failing", "", None, False, failing)
    sb = sandbox(cfg)
    for _ in range(3):
        r = sb.run('try:\n    call_tool("failing")\nexcept ToolError as e:\n    print(e)')
        # A leaked exception would turn this return into SystemError.
        assert r["stdout"] == "boom\n"


def test_artifacts_are_bytes_with_raw_names(sandbox):
    cfg = native_config()
    cfg.set_limit("output_files", 3)
    sb = sandbox(cfg)
    code = """
import os
open("/output/all.bin", "wb").write(bytes(range(256)))
os.makedirs("/output/sub")
open("/output/sub/r.json", "w").write('{"a": 1}')
open(b"/output/caf\\xe9.txt", "wb").write(b"latin-1 name")
os.symlink("/etc/passwd", "/output/link")
"""
    r = sb.run(code)
    assert r["status"] == "ok", r["stderr"]
    arts = {path: (media, data) for path, media, data in r["artifacts"]}
    assert arts["all.bin"] == ("application/octet-stream", bytes(range(256)))
    assert arts["sub/r.json"] == ("application/json", b'{"a": 1}')
    raw = [p for p in arts if os.fsencode(p) == b"caf\xe9.txt"]
    assert raw and arts[raw[0]][1] == b"latin-1 name"
    assert all(isinstance(d, bytes) for _, d in arts.values())
    assert ("link", "symbolic link") in r["skipped"] and r["skipped_count"] == 1
    r = sb.run("for i in range(5): open(f'/output/{i}.txt', 'w').write('x')")
    assert len(r["artifacts"]) == 3 and r["output_limits_hit"] == ["files"]


def test_stats(sandbox):
    st = sandbox().stats()
    assert set(st) == {"template_pid", "template_private_bytes", "parked_cells",
                       "parked_cell_private_bytes"}
    assert st["template_pid"] > 0 and os.path.exists(f"/proc/{st['template_pid']}")
    assert st["parked_cells"] >= 1 and st["template_private_bytes"] > 0


def test_the_helper_is_the_packages_own(sandbox):
    # The Python layer points every config at the snapcell-cell shipped beside the extension,
    # and the guest module beside it is what the interpreter the helper execs runs.
    from snapcell import _sandbox
    helper = os.path.join(os.path.dirname(native.__file__), "snapcell-cell")
    assert os.access(helper, os.X_OK) and _sandbox._HELPER == helper
    assert os.path.isfile(os.path.join(os.path.dirname(helper), "_snapcell_guest.abi3.so"))
    pid = sandbox().stats()["template_pid"]
    argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    assert argv[1:6] == [b"-I", b"-S", b"-B", b"-X", b"utf8"], argv
    assert b"/.snapcell/guest/_snapcell_guest.abi3.so" in argv[7], argv


def test_cancel_from_another_thread_kills_the_cell(sandbox):
    token = native.Cancel()
    started = threading.Event()

    def started_tool(args):
        started.set()
        return "null"

    cfg = native_config()
    cfg.add_tool("started", "", None, False, started_tool)
    sb = sandbox(cfg)
    firing = threading.Thread(target=lambda: (started.wait(30), token.fire()))
    firing.start()
    r = sb.run("call_tool('started')\nwhile True: pass", token)
    firing.join()
    assert r["status"] == "cancelled"
    assert sb.run("print('next')", None)["stdout"] == "next\n"


def test_a_fired_token_cancels_before_the_code_runs(sandbox):
    sb = sandbox()
    token = native.Cancel()
    token.fire()
    r = sb.run("print('ran')", token)
    assert r["status"] == "cancelled" and r["stdout"] == ""
    with pytest.raises(TypeError):
        sb.run("print(1)", object())


# ---- threads and the GIL ----


def test_eight_threads_run_at_once_on_one_sandbox(sandbox):
    barrier = threading.Barrier(8, timeout=30)
    seen = []

    def meet(args):
        # Returns only when all 8 runs are inside a tool call at the same time: the GIL is
        # released during runs and each callback takes it back.
        barrier.wait()
        seen.append(json.loads(args)["i"])
        return json.dumps(threading.get_ident())

    cfg = native_config()
    cfg.add_tool("meet", "", None, False, meet)
    cfg.set_limit("wall_ms", 60000)
    sb = sandbox(cfg)
    results = [None] * 8

    def worker(i):
        results[i] = sb.run(f'print(call_tool("meet", i={i}))')

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not barrier.broken
    assert sorted(seen) == list(range(8))
    assert all(r is not None and r["status"] == "ok" for r in results), results
    # Each callback ran on the thread that called run.
    assert {int(r["stdout"]) for r in results} == {t.ident for t in threads}


def test_other_python_threads_run_while_a_cell_runs(sandbox):
    sb = sandbox()
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.01)

    t = threading.Thread(target=ticker)
    t.start()
    r = sb.run("import time; time.sleep(0.5)")
    stop.set()
    t.join()
    assert r["status"] == "ok" and len(ticks) >= 20


# ---- sessions and snapshots ----


def test_sessions_and_snapshots(sandbox):
    sb = sandbox()
    s = sb.session()
    assert s.run("x = 1")["status"] == "ok"
    assert s.run("print(x, call_tool('add', a=x, b=1))")["stdout"] == "1 2\n"
    snap = s.snapshot()
    s.run("x = 99")
    branch = snap.session()
    assert branch.run("print(x)")["stdout"] == "1\n"
    assert s.run("print(x)")["stdout"] == "99\n"
    s.restore(snap)
    assert s.run("print(x)")["stdout"] == "1\n"
    with pytest.raises(TypeError):
        s.restore("not a snapshot")
    for obj in (s, snap, branch):
        obj.close()
        obj.close()
    with pytest.raises(native.SnapcellError, match="session is closed"):
        s.run("1")
    with pytest.raises(native.SnapcellError, match="snapshot is closed"):
        snap.session()
    with pytest.raises(native.SnapcellError):
        branch.restore(snap)


def test_a_session_is_used_by_one_thread_at_a_time(sandbox):
    entered, release = threading.Event(), threading.Event()

    def hold(args):
        entered.set()
        release.wait(30)
        return "null"

    cfg = native_config()
    cfg.add_tool("hold", "", None, False, hold)
    s = sandbox(cfg).session()
    out = {}
    t = threading.Thread(target=lambda: out.update(r=s.run("call_tool('hold')")))
    t.start()
    try:
        assert entered.wait(30)
        with pytest.raises(RuntimeError, match="in use"):
            s.run("1")
        with pytest.raises(RuntimeError, match="in use"):
            s.close()
    finally:
        release.set()
        t.join(30)
    assert out["r"]["status"] == "ok"
    s.close()


def test_sessions_fail_after_their_sandbox_closes_and_can_still_be_closed(sandbox):
    sb = sandbox()
    s = sb.session()
    s.run("x = 1")
    snap = s.snapshot()
    sb.close()
    with pytest.raises(native.SnapcellError, match="sandbox is closed") as e:
        s.run("print(x)")
    assert e.value.name == "SNAPCELL_E_TEMPLATE"
    with pytest.raises(native.SnapcellError):
        snap.session()
    s.close()
    snap.close()


# ---- closing, collection, what is left behind ----


def test_close_twice_and_use_after_close(sandbox, work_tmp):
    sb = sandbox()
    pid = sb.stats()["template_pid"]
    assert os.listdir(work_tmp)  # the sandbox's work directory is there
    sb.close()
    sb.close()
    assert not os.path.exists(f"/proc/{pid}")
    assert descendants() == set()
    assert os.listdir(work_tmp) == []
    with pytest.raises(native.SnapcellError, match="sandbox is closed") as e:
        sb.run("1")
    assert e.value.code == -5003 and e.value.name == "SNAPCELL_E_TEMPLATE"
    for call in (sb.session, sb.stats, lambda: sb.isolation):
        with pytest.raises(native.SnapcellError):
            call()


def test_collection_frees_everything(work_tmp):
    cfg = native_config()
    sb = native.Sandbox(cfg)
    s = sb.session()
    s.run("x = 1")
    snap = s.snapshot()
    assert descendants() and os.listdir(work_tmp)
    del sb, s, snap, cfg
    gc.collect()
    assert descendants() == set()
    assert os.listdir(work_tmp) == []


def test_a_cycle_through_a_tool_callback_is_collected(work_tmp):
    cfg = native_config()
    holder = {}
    cfg.add_tool("me", "", None, False, lambda args: json.dumps(str(holder["sb"].isolation)))
    holder["sb"] = native.Sandbox(cfg)
    holder["cfg"] = cfg
    r = holder["sb"].run("print(call_tool('me'))")
    assert r["stdout"] == holder["sb"].isolation + "\n"
    del cfg, holder
    gc.collect()
    assert descendants() == set()
    assert os.listdir(work_tmp) == []


def test_gc_after_close(work_tmp):
    sb = native.Sandbox(native_config())
    s = sb.session()
    sb.close()
    del sb
    gc.collect()
    with pytest.raises(native.SnapcellError):
        s.run("1")  # the session keeps the closed sandbox object alive
    del s
    gc.collect()
    assert descendants() == set() and os.listdir(work_tmp) == []


def test_a_sandbox_keeps_its_callbacks_alive():
    cfg = native_config()
    cfg.add_tool("tmp", "", None, False, lambda args: '"still here"')
    sb = native.Sandbox(cfg)
    cfg.remove_tool("tmp")
    del cfg
    gc.collect()
    try:
        assert sb.run("print(call_tool('tmp'))")["stdout"] == "still here\n"
    finally:
        sb.close()


def test_callback_references_are_balanced():
    def tool(args):
        return args

    base = sys.getrefcount(tool)
    cfg = native_config()
    cfg.add_tool("t", "", None, False, tool)
    assert sys.getrefcount(tool) == base + 1  # the config's
    sb = native.Sandbox(cfg)
    assert sys.getrefcount(tool) == base + 2  # and the sandbox's
    for _ in range(50):
        assert sb.run("call_tool('t', x=1)")["tool_calls"][0][3]
    assert sys.getrefcount(tool) == base + 2
    sb.close()
    del sb
    cfg.add_tool("t", "", None, False, add_json)  # replacing drops the old callable
    assert sys.getrefcount(tool) == base
    cfg.add_tool("t", "", None, False, tool)
    cfg.remove_tool("t")
    assert sys.getrefcount(tool) == base


def test_close_waits_for_runs_in_flight(sandbox):
    entered = threading.Event()

    def slow(args):
        entered.set()
        time.sleep(0.5)
        return '"done"'

    cfg = native_config()
    cfg.add_tool("slow", "", None, False, slow)
    sb = sandbox(cfg)
    out = {}
    t = threading.Thread(target=lambda: out.update(r=sb.run("print(call_tool('slow'))")))
    t.start()
    assert entered.wait(30)
    sb.close()  # returns only once the run has finished
    assert "r" in out and out["r"]["stdout"] == "done\n"
    t.join(30)
    assert descendants() == set()


def test_close_from_a_tool_callback_is_refused():
    holder = {}
    errors = []

    def closer(args):
        try:
            holder["sb"].close()
        except native.SnapcellError as e:
            errors.append(str(e))
        return "null"

    cfg = native_config()
    cfg.add_tool("closer", "", None, False, closer)
    sb = holder["sb"] = native.Sandbox(cfg)
    try:
        assert sb.run("call_tool('closer')")["status"] == "ok"
        assert errors and "tool callback" in errors[0]
    finally:
        sb.close()
    assert descendants() == set()


def test_no_leak_over_2000_runs_with_a_tool(sandbox):
    # Large payloads make any per-run leak (result, output, artifact, tool arguments or
    # answer) at least 16 KiB, so 2,000 runs would grow the process by over 30 MiB.
    payload = "y" * 16384

    def echo(args):
        return json.dumps(json.loads(args)["s"])

    cfg = native_config()
    cfg.add_tool("echo", "", None, False, echo)
    sb = sandbox(cfg)
    code = (
        f"s = call_tool('echo', s='{payload}')\n"
        "open('/output/a.bin', 'wb').write(s.encode())\nprint(s)"
    )

    def runs(n):
        for _ in range(n):
            r = sb.run(code)
            assert r["status"] == "ok" and len(r["artifacts"][0][2]) == 16384
            del r

    runs(200)
    gc.collect()
    before = rss_bytes()
    runs(2000)
    gc.collect()
    grown = rss_bytes() - before
    assert grown < 8 * 1024 * 1024, f"RSS grew by {grown} bytes over 2,000 runs"
