"""snapcell.agent_framework against the real agent-framework-core 1.23 and real sandboxes.
Test names carry the item of ../shared/spec/codeact-parity.md they check."""

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
from agent_framework import (
    Agent,
    FunctionTool,
    tool,
)

from conftest import descendants
from scripted_chat import ScriptedChatClient
from snapcell import _interpreter
from snapcell.agent_framework import AllowedDomain, CodeActProvider, ExecuteCodeTool, FileMount


@tool(approval_mode="never_require")
def compute(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool(approval_mode="always_require")
def delete_everything(path: str) -> str:
    """Deletes a path (needs approval)."""
    return path


def lookup(city: str, units: str = "metric") -> dict:
    """Looks up the weather."""
    return {"city": city, "units": units, "temp": 21}


def invoke(t, code):
    return asyncio.run(t.invoke(arguments={"code": code}))


def texts(contents):
    return [c.text for c in contents if c.type == "text"]


# ---- tools and approval (items 1-3) ----


def test_item1_tools_accepts_one_callable_or_sequence_and_ignores_others():
    t = ExecuteCodeTool(tools=lookup)
    assert [x.name for x in t.get_tools()] == ["lookup"]
    assert isinstance(t.get_tools()[0], FunctionTool)
    named_execute = FunctionTool(name="execute_code", func=lambda code: code, description="x")
    t = ExecuteCodeTool(tools=[compute, lookup, named_execute, {"type": "web_search"}])
    assert [x.name for x in t.get_tools()] == ["compute", "lookup"]


def test_item2_replace_keeps_identity_remove_and_clear():
    t = ExecuteCodeTool(tools=[compute])
    other = FunctionTool(name="compute", func=lambda a, b: a * b, description="multiplies")
    t.add_tools(other)
    assert t.get_tools() == [other] and t.get_tools()[0] is other
    with pytest.raises(KeyError):
        t.remove_tool("missing")
    t.add_tools([lookup])
    t.remove_tool("compute")
    assert [x.name for x in t.get_tools()] == ["lookup"]
    t.clear_tools()
    assert t.get_tools() == []


def test_item3_approval_mode_follows_the_managed_tools():
    t = ExecuteCodeTool(tools=[compute])
    assert t.approval_mode == "never_require"
    t.add_tools(delete_everything)
    assert t.approval_mode == "always_require"
    t.remove_tool("delete_everything")
    assert t.approval_mode == "never_require"
    assert ExecuteCodeTool(approval_mode="always_require").approval_mode == "always_require"


def test_item3_agent_tools_never_count():
    provider = CodeActProvider(tools=[compute])
    agent = Agent(ScriptedChatClient("print(1)"), tools=[delete_everything], context_providers=[provider])
    state = {}
    ctx = _Context()
    asyncio.run(provider.before_run(agent=agent, session=None, context=ctx, state=state))
    assert ctx.tools[0].approval_mode == "never_require"
    provider.close()


# ---- files (items 4-8) ----


def test_item4_mount_forms_resolve_and_must_exist(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("x\n")
    monkeypatch.chdir(tmp_path)
    t = ExecuteCodeTool(file_mounts=["data", ("data/a.csv", "files/a.csv"), FileMount(tmp_path / "data", "d2")])
    assert t.get_file_mounts() == [
        FileMount(tmp_path / "data", "/input/data"),
        FileMount(tmp_path / "data" / "a.csv", "/input/files/a.csv"),
        FileMount(tmp_path / "data", "/input/d2"),
    ]
    assert all(isinstance(m.host_path, Path) and m.host_path.is_absolute() for m in t.get_file_mounts())
    with pytest.raises((FileNotFoundError, ValueError), match="missing"):
        t.add_file_mounts(("missing", "m"))
    home = Path.home()
    marker = home / ".snapcell-test-mount"
    marker.write_text("1")
    try:
        t.add_file_mounts(("~/.snapcell-test-mount", "home"))
        assert t.get_file_mounts()[-1].host_path == marker.resolve()
    finally:
        marker.unlink()


def test_item5_mount_paths_normalise_replace_remove_clear(tmp_path):
    (tmp_path / "a").write_text("a")
    (tmp_path / "b").write_text("b")
    t = ExecuteCodeTool()
    t.add_file_mounts([(str(tmp_path / "a"), " \\input\\x\\.\\y "), (str(tmp_path / "b"), "z")])
    t.add_file_mounts((str(tmp_path / "b"), "/input/x/y"))
    assert [(m.host_path.name, m.mount_path) for m in t.get_file_mounts()] == [("b", "/input/x/y"), ("b", "/input/z")]
    for bad in ("../etc", "input/..", "", "  ", "/input", "./"):
        with pytest.raises(ValueError):
            t.add_file_mounts((str(tmp_path / "a"), bad))
    with pytest.raises(KeyError):
        t.remove_file_mount("nope")
    t.remove_file_mount("x/y")
    assert [m.mount_path for m in t.get_file_mounts()] == ["/input/z"]
    t.clear_file_mounts()
    assert t.get_file_mounts() == []


def test_item6_workspace_children_under_input_and_mounts_win(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("from workspace")
    (ws / "sub").mkdir()
    (ws / "sub" / "deep.txt").write_text("deep")
    other = tmp_path / "other.txt"
    other.write_text("from mount")
    with pytest.raises((ValueError, FileNotFoundError, NotADirectoryError)):
        ExecuteCodeTool(workspace_root=tmp_path / "missing")
    with pytest.raises((ValueError, NotADirectoryError)):
        ExecuteCodeTool(workspace_root=other)
    with ExecuteCodeTool(workspace_root=ws, file_mounts=[(str(other), "notes.txt")]) as t:
        out = invoke(t, "print(open('/input/notes.txt').read(), open('/input/sub/deep.txt').read())")
    assert texts(out) == ["from mount deep\n"]


def test_item7_links_are_never_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key.txt").write_text("TOPSECRET")
    ws = tmp_path / "ws"
    (ws / "deep" / "er").mkdir(parents=True)
    (ws / "real.txt").write_text("real")
    os.symlink(secret / "key.txt", ws / "link.txt")
    os.symlink(secret, ws / "deep" / "er" / "dirlink")
    os.symlink("../../../secret/key.txt", ws / "deep" / "er" / "rel.txt")
    os.mkfifo(ws / "fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(ws / "sock"))
    link_root = tmp_path / "ws-link"
    os.symlink(ws, link_root)
    code = """
import os
found = []
for root, dirs, files in os.walk('/input'):
    found += [os.path.join(root, n) for n in dirs + files]
print(sorted(found))
blob = ''
for root, dirs, files in os.walk('/input'):
    for n in files:
        blob += open(os.path.join(root, n)).read()
print('TOPSECRET' in blob)
"""
    with ExecuteCodeTool(workspace_root=link_root) as t:
        out = texts(invoke(t, code))
    s.close()
    assert out == ["['/input/deep', '/input/deep/er', '/input/real.txt']\nFalse\n"]


def test_item8_changed_files_give_a_fresh_view(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    f = ws / "v.txt"
    f.write_text("one")
    with ExecuteCodeTool(workspace_root=ws) as t:
        assert texts(invoke(t, "print(open('/input/v.txt').read())")) == ["one\n"]
        f.write_text("two, longer")
        assert texts(invoke(t, "print(open('/input/v.txt').read())")) == ["two, longer\n"]


# ---- network entries (items 9-10) ----


def test_item9_entries_normalise():
    t = ExecuteCodeTool(
        allowed_domains=[
            "https://API.Example.com/v1",
            ("127.0.0.1:8080", "get"),
            AllowedDomain("bing.com", ("post", " GET ", "get")),
        ]
    )
    assert t.get_allowed_domains() == [
        AllowedDomain("127.0.0.1:8080", ("GET",)),
        AllowedDomain("api.example.com", None),
        AllowedDomain("bing.com", ("GET", "POST")),
    ]
    for bad in ["", "   ", ("x.com", ""), ("x.com", [])]:
        with pytest.raises(ValueError):
            t.add_allowed_domains(bad)


def test_item10_later_entry_replaces_sorted_remove_clear():
    t = ExecuteCodeTool(allowed_domains=["b.com", ("a.com", "GET")])
    t.add_allowed_domains(("https://a.com/x", ["PUT"]))
    assert t.get_allowed_domains() == [AllowedDomain("a.com", ("PUT",)), AllowedDomain("b.com", None)]
    with pytest.raises(KeyError):
        t.remove_allowed_domain("c.com")
    t.remove_allowed_domain("https://B.com/")
    assert [d.target for d in t.get_allowed_domains()] == ["a.com"]
    t.clear_allowed_domains()
    assert t.get_allowed_domains() == []


# ---- what the model is told (items 11-12) ----


def test_item11_description(tmp_path):
    (tmp_path / "d").mkdir()
    t = ExecuteCodeTool(tools=[compute, lookup])
    text = t.description
    assert "call_tool" in text and "keyword" in text
    for name, desc in (("compute", "Adds two integers."), ("lookup", "Looks up the weather.")):
        assert name in text and desc in text
    assert "units" in text and "metric" in text
    assert "/output" not in text
    t.add_file_mounts((str(tmp_path / "d"), "data"))
    t.add_allowed_domains([("api.example.com", ["GET", "POST"]), "bing.com"])
    text = t.description
    assert "/input" in text and "/output" in text and "/input/data" in text
    assert "api.example.com" in text and "GET, POST" in text and "bing.com" in text
    as_json = ExecuteCodeTool(tools=[compute], tool_description_format="json").description
    assert '"properties"' in as_json
    with pytest.raises(ValueError):
        ExecuteCodeTool(tool_description_format="yaml")


def test_item12_instructions_name_no_tool(tmp_path):
    t = ExecuteCodeTool(tools=[compute, lookup])
    plain = t.build_instructions(tools_visible_to_model=False)
    assert "execute_code" in plain and "print" in plain
    assert "compute" not in plain and "lookup" not in plain
    assert "/output" not in plain
    t.add_file_mounts((str(tmp_path), "data"))
    with_fs = t.build_instructions(tools_visible_to_model=False)
    assert "/output/" in with_fs and "/input/data" not in with_fs


# ---- running code (items 13-15) ----


def test_item13_content_order_and_shapes():
    code = """
import sys
open('/output/b.txt', 'w').write('bee')
import os; os.makedirs('/output/sub')
open('/output/sub/a.png', 'wb').write(b'\\x89PNG')
open('/output/a.json', 'w').write('{}')
print('out')
print('warn', file=sys.stderr)
"""
    with ExecuteCodeTool() as t:
        out = invoke(t, code)
        assert [c.type for c in out] == ["text", "data", "data", "data", "text"]
        assert out[0].text == "out\n" and out[-1].text == "warn\n"
        paths = [c.additional_properties["path"] for c in out[1:4]]
        assert paths == ["/output/a.json", "/output/b.txt", "/output/sub/a.png"]
        assert out[2].uri == "data:text/plain;base64," + base64.b64encode(b"bee").decode()
        assert out[3].media_type == "image/png"
        empty = invoke(t, "x = 1")
        assert [c.type for c in empty] == ["text"] and "without output" in empty[0].text


def test_item13_the_last_expression_value_is_the_last_item():
    with ExecuteCodeTool() as t:
        out = invoke(t, "import sys\nprint('out')\nprint('warn', file=sys.stderr)\n{'n': 6 * 7}")
        assert texts(out) == ["out\n", "warn\n", 'value: {"n": 42}']
        assert texts(invoke(t, "20 + 22")) == ["value: 42"]
        assert "without output" in texts(invoke(t, "None"))[0]
        shown = texts(invoke(t, "object()"))
        assert len(shown) == 1 and shown[0].startswith("value: not shown") and "JSON" in shown[0]
        failed = invoke(t, "print('before')\n1/0")
        assert not any(x.startswith("value") for x in texts(failed))


@pytest.mark.parametrize(
    "code, status, detail",
    [
        ("print('before')\n1/0", "error", "ZeroDivisionError"),
        ("while True: pass", "timeout", ""),
        ("x = bytearray(600 * 1024 * 1024)", "memory", "MemoryError"),
        # bpf(2) is a seccomp tripwire: the kernel kills the cell.
        ("import ctypes; ctypes.CDLL(None).syscall(321, 0, 0, 0)", "killed", ""),
    ],
)
def test_item13_failures_are_error_items_naming_the_status(code, status, detail):
    with ExecuteCodeTool(timeout=1, memory_limit=256 * 1024 * 1024) as t:
        out = invoke(t, code)
    err, summary = out[-2], out[-1]
    assert err.type == "error" and err.error_code == status
    assert {"error": "error", "timeout": "time limit", "memory": "memory", "killed": "killed"}[status] in err.message
    assert detail in (err.error_details or "")
    # the cause again as the last item, text: chat clients send the model text items only
    assert summary.type == "text" and summary.text.startswith("Execution ")
    if status == "error":
        assert texts(out) == ["before\n", summary.text] and "Traceback" in err.error_details
        assert "ZeroDivisionError: division by zero" in summary.text


def test_item13_output_caps_are_error_items_naming_cap_and_file():
    with ExecuteCodeTool(max_output_files=2, max_output_file_bytes=10) as t:
        out = invoke(t, "for n in 'abc': open(f'/output/{n}.txt', 'w').write(n)\nopen('/output/0big.bin','wb').write(b'x'*100)")
    errors = [c for c in out if c.type == "error"]
    assert len(errors) == 1
    assert "max_output_files" in errors[0].message and "max_output_file_bytes" in errors[0].message
    assert "/output/0big.bin" in errors[0].error_details and "/output/c.txt" in errors[0].error_details
    assert [c.additional_properties["path"] for c in out if c.type == "data"] == ["/output/a.txt", "/output/b.txt"]


def test_item14_fresh_output_each_call_input_persists_and_stateful(tmp_path):
    (tmp_path / "in.txt").write_text("kept")
    with ExecuteCodeTool(file_mounts=[(str(tmp_path / "in.txt"), "in.txt")]) as t:
        invoke(t, "open('/output/x.txt', 'w').write('1'); y = 5")
        out = invoke(t, "import os; print(os.listdir('/output'), open('/input/in.txt').read(), 'y' in globals())")
        assert texts(out) == ["[] kept False\n"]
    with ExecuteCodeTool(stateful=True) as t:
        invoke(t, "y = 5")
        assert texts(invoke(t, "print(y)")) == ["5\n"]


def test_item15_invoke_code_keyword_and_tool_values():
    seen = {}

    def record(payload: dict, n: int) -> dict:
        seen.update(payload=payload, n=n)
        return {"echo": payload, "n": n}

    def explode(why: str) -> str:
        raise ValueError(f"cannot: {why}")

    parsed = FunctionTool(name="parsed", func=lambda: {"k": 1}, description="x", result_parser=lambda v: "PARSED")
    with ExecuteCodeTool(tools=[record, explode, parsed], include_detailed_errors=True) as t:
        code = """
v = call_tool('record', payload={'a': [1, 2]}, n=3)
print(type(v).__name__, v)
print(call_tool('parsed'))
try:
    call_tool('explode', why='no')
except ToolError as e:
    print('ToolError', e)
"""
        out = asyncio.run(t.invoke(code=code))
    assert texts(out) == ["dict {'echo': {'a': [1, 2]}, 'n': 3}\n{'k': 1}\nToolError cannot: no\n"]
    assert seen == {"payload": {"a": [1, 2]}, "n": 3}


def test_item15_the_loop_keeps_running_during_a_run():
    async def main():
        ticks = 0
        done = False

        async def ticker():
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0.01)

        with ExecuteCodeTool() as t:
            task = asyncio.create_task(ticker())
            out = await t.invoke(arguments={"code": "import time; time.sleep(0.5); print('ok')"})
            done = True
            await task
        return out, ticks

    out, ticks = asyncio.run(main())
    assert texts(out) == ["ok\n"] and ticks >= 10


def test_async_tool_uses_the_callers_loop():
    async def main():
        event = asyncio.Event()
        loops = []

        async def wait_event() -> str:
            loops.append(asyncio.get_running_loop())
            await event.wait()
            return "set"

        with ExecuteCodeTool(tools=[wait_event]) as t:
            task = asyncio.create_task(t.invoke(arguments={"code": "print(call_tool('wait_event'))"}))
            while not loops:
                await asyncio.sleep(0.01)
            event.set()
            out = await asyncio.wait_for(task, 30)
        return out, loops[0] is asyncio.get_running_loop()

    out, same_loop = asyncio.run(main())
    assert texts(out) == ["set\n"] and same_loop


# ---- provider (items 16-17) ----


class _Context:
    def __init__(self):
        self.instructions, self.tools = [], []

    def extend_instructions(self, source_id, text):
        self.instructions.append((source_id, text))

    def extend_tools(self, source_id, tools):
        self.tools.extend(tools)


def test_item16_before_run_adds_one_instruction_and_one_run_tool(tmp_path):
    provider = CodeActProvider(tools=[compute], file_mounts=[(str(tmp_path), "data")], allowed_domains=["x.com"])
    assert provider.source_id == "snapcell_codeact"
    ctx, state = _Context(), {}
    asyncio.run(provider.before_run(agent=None, session=None, context=ctx, state=state))
    assert len(ctx.instructions) == 1 and ctx.instructions[0][0] == "snapcell_codeact"
    assert len(ctx.tools) == 1 and ctx.tools[0].name == "execute_code"
    summary = state["snapcell_codeact"]
    assert json.loads(json.dumps(summary)) == summary
    assert summary["tool_names"] == ["compute"] and summary["approval_mode"] == "never_require"
    assert summary["filesystem_enabled"] and summary["file_mounts"][0]["mount_path"] == "/input/data"
    assert summary["network_enabled"] and summary["allowed_domains"] == [{"target": "x.com", "methods": None}]
    assert summary["max_output_files"] == 20 and summary["tool_description_format"] == "compact"
    run_tool = ctx.tools[0]
    provider.add_tools(delete_everything)
    provider.clear_file_mounts()
    assert [x.name for x in run_tool.get_tools()] == ["compute"]
    assert run_tool.approval_mode == "never_require" and run_tool.get_file_mounts()
    provider.close()



def test_item17_agent_end_to_end():
    client = ScriptedChatClient('total = call_tool("compute", a=20, b=22)\nprint(total)')
    with CodeActProvider(tools=[compute]) as provider:
        agent = Agent(client, instructions="Be brief.", context_providers=[provider])
        response = asyncio.run(agent.run("What is 20 + 22?"))
    assert "42\n" in response.text
    tool_names = [t.name if hasattr(t, "name") else t for t in client.requests[0][1]["tools"]]
    assert tool_names == ["execute_code"]


# ---- lifecycle and concurrency (items 18-19) ----


def test_item18_eight_concurrent_invokes_share_one_template_and_run_at_once(work_tmp):
    barrier = threading.Barrier(8, timeout=60)

    def meet() -> int:
        return barrier.wait()

    async def main(t):
        return await asyncio.gather(*(t.invoke(arguments={"code": "print(call_tool('meet'))"}) for _ in range(8)))

    t = ExecuteCodeTool(tools=[meet])
    outs = asyncio.run(main(t))
    assert sorted(int(texts(o)[0]) for o in outs) == list(range(8))
    assert len(list(work_tmp.iterdir())) == 1  # one sandbox, one work directory
    run_tool = t.create_run_tool()
    invoke(run_tool, "pass")
    assert len(list(work_tmp.iterdir())) == 1  # the run tool shares it
    t.close()
    assert descendants() == set()
    assert list(work_tmp.iterdir()) == []


def test_item18_close_after_a_timeout_leaves_nothing(work_tmp):
    provider = CodeActProvider(timeout=0.5)
    ctx = _Context()
    asyncio.run(provider.before_run(agent=None, session=None, context=ctx, state={}))
    out = invoke(ctx.tools[0], "while True: pass")
    assert out[-2].error_code == "timeout" and "time limit" in out[-1].text
    provider.close()
    assert descendants() == set()
    assert list(work_tmp.iterdir()) == []


def test_item19_setup_errors_raise_and_failed_runs_do_not():
    with pytest.raises(TypeError):
        ExecuteCodeTool(max_output_files=True)
    with pytest.raises(ValueError):
        ExecuteCodeTool(max_output_file_bytes=0)
    with pytest.raises(ValueError):
        ExecuteCodeTool(memory_limit=1)  # below the floor the C library sets
    with ExecuteCodeTool() as t:
        out = invoke(t, "raise SystemExit(3)")
        assert out[-2].type == "error" and "exited with status 3" in out[-1].text


def test_reference_only_keywords_warn_and_are_ignored():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = ExecuteCodeTool(backend="wasm", module="python_guest.path")  # the reference's defaults
        assert w == []
        t = ExecuteCodeTool(backend="hyperlight", module="my_guest", module_path="/opt/guest")
    assert any("backend, module, module_path" in str(x.message) for x in w)
    t.close()


def test_item7_reject_links_is_the_strict_option(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "ok.txt").write_text("ok")
    os.symlink("/etc/hostname", ws / "link.txt")
    with ExecuteCodeTool(workspace_root=ws, reject_links=True) as t:
        with pytest.raises(ValueError, match="link.txt is a symbolic link"):
            invoke(t, "print(1)")
    with ExecuteCodeTool(workspace_root=ws) as t:
        assert texts(invoke(t, "import os; print(os.listdir('/input'))")) == ["['ok.txt']\n"]


def test_our_keywords_python_environment_and_preload():
    # Debian's numpy (scripts/install-test-deps), exposed read-only and imported in the template:
    # built for Debian's interpreter, so that one runs (the default is the caller's own).
    with ExecuteCodeTool(python="/usr/bin/python3", python_paths=["/usr/lib/python3/dist-packages"],
                         preload=["numpy"], memory_limit=1 << 30) as t:
        out = invoke(t, "import sys, numpy\nprint('numpy' in sys.modules, int(numpy.arange(5).sum()))")
    assert texts(out) == ["True 10\n"]
    with pytest.raises(Exception, match="no_such_module"):
        with ExecuteCodeTool(preload=["no_such_module"]) as t:
            invoke(t, "pass")
    with ExecuteCodeTool(warmup="import json\njson.primed = 7") as t:
        assert texts(invoke(t, "import json; print(json.primed)")) == ["7\n"]


def test_the_interpreter_is_in_the_state_and_the_cache_key():
    """The cells run the caller's base interpreter unless python= or venv= names another; the
    serializable state names it, and two configurations differing only in it share nothing."""
    base = _interpreter.default_python()
    t = ExecuteCodeTool()
    state = t.build_serializable_state()
    assert (state["python"], state["venv"]) == (base, None)
    debian = ExecuteCodeTool(python="/usr/bin/python3")
    assert debian.build_serializable_state()["python"] == os.path.realpath("/usr/bin/python3")
    assert debian._settings.key() != t._settings.key()
    assert debian.create_run_tool()._settings.key() == debian._settings.key()
    outs = [texts(invoke(x, "import sys; print(list(sys.version_info[:3]))")) for x in (t, debian)]
    assert outs[0] == [f"{list(sys.version_info[:3])}\n"]
    debian_version = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(list(sys.version_info[:3]))"],
                                    check=True, capture_output=True, text=True).stdout
    assert outs[1] == [debian_version]
    t.close()
    debian.close()


def test_the_interpreter_of_a_venv_and_of_a_provider(tmp_path, monkeypatch):
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / "lib" / "python3.11" / "site-packages" / "venv_marker.py").write_text("WHERE = 'venv'\n")
    for p in [tmp_path, *tmp_path.rglob("*")]:
        if not p.is_symlink():  # a root caller's sandbox runs as a uid of its own
            p.chmod(0o755 if p.is_dir() else 0o644)
    with ExecuteCodeTool(venv=venv) as t:
        state = t.build_serializable_state()
        assert (state["python"], state["venv"]) == (os.path.realpath("/usr/bin/python3"), str(venv))
        assert texts(invoke(t, "import venv_marker; print(venv_marker.WHERE)")) == ["venv\n"]
    # An application embedding Python names the interpreter; without one the provider refuses.
    monkeypatch.setattr(sys, "executable", "")
    with pytest.raises(ValueError, match="pass python="):
        CodeActProvider()
    provider = CodeActProvider(python="/usr/bin/python3")
    ctx, run_state = _Context(), {}
    asyncio.run(provider.before_run(agent=None, session=None, context=ctx, state=run_state))
    assert run_state["snapcell_codeact"]["python"] == os.path.realpath("/usr/bin/python3")
    provider.close()
