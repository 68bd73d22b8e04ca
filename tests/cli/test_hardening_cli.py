"""Adversarial findings as the CLI shows them: hostile tool names in the JSON call log."""
import json

RAW_CALL = (b"import os, struct\n"
            b"def call(payload):\n"
            b"    payload = struct.pack('<IB', 7, 0) + payload\n"
            b"    os.write(3, struct.pack('<I', 1 + len(payload)) + b'C' + payload)\n"
            b"    n = struct.unpack('<I', os.read(3, 4))[0]\n"
            b"    got = b''\n"
            b"    while len(got) < n:\n"
            b"        got += os.read(3, n - len(got))\n"
            b"call(b'\\xff\\xfeecho\\0{}')\n"
            b"call(b'echo\\0forged\\0{}')\n")


def test_hostile_tool_names_stay_in_the_json_log(snapcell):
    r = snapcell("run", "--json", "--tool", "echo=cat", "-", stdin=RAW_CALL)
    assert r.returncode == 0, r.stderr
    calls = json.loads(r.stdout)["tool_calls"]
    assert [(c["name"], c["ok"]) for c in calls] == [("\\xff\\xfeecho", False),
                                                     ("echo\\x00forged", False)]


PRINT_ENV = "python3 -c 'import json, os, sys; sys.stdin.read(); print(json.dumps(dict(os.environ)))'"


def test_tool_commands_start_with_an_explicit_environment(snapcell):
    # Command tools inherited the MCP token and the variables an --allow-header reads.
    secrets = {"SNAPCELL_MCP_TOKEN": "t0ken-s3cret", "API_KEY": "k3y-s3cret",
               "UNLISTED": "not-for-children", "KEEP": "passed-on", "LANG": "C.UTF-8"}
    code = b"import json\nprint(json.dumps(call_tool('printenv')))\n"
    r = snapcell("run", "--tool", f"printenv={PRINT_ENV}", "--tool-env", "KEEP",
                 "--allow", "https://api.example.com",
                 "--allow-header", "https://api.example.com=Authorization: Bearer ${env:API_KEY}",
                 "-", stdin=code, env=secrets)
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    assert "SNAPCELL_MCP_TOKEN" not in seen and "API_KEY" not in seen and "UNLISTED" not in seen
    assert not any("s3cret" in v for v in seen.values())
    assert seen["KEEP"] == "passed-on" and seen["LANG"] == "C.UTF-8" and seen["PATH"]


def test_tool_env_never_names_the_token(snapcell):
    r = snapcell("run", "--tool-env", "SNAPCELL_MCP_TOKEN", "-", stdin=b"print(1)\n")
    assert r.returncode == 2
    assert b"--tool-env SNAPCELL_MCP_TOKEN: it holds the MCP server's token" in r.stderr


# The cell scans its heap and stack (mapped pages around sbrk(0) and argv[0], probed with
# msync: a cell has no /proc) for each needle, given split so the code itself does not hold it.
SCAN_MEMORY = b"""import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.sbrk.restype = ctypes.c_void_p
libc.sbrk.argtypes = [ctypes.c_long]
libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
P = 4096
def mapped(a):
    return a > 0 and libc.msync(ctypes.c_void_p(a), P, 1) == 0
def region(addr):
    lo = hi = addr & ~(P - 1)
    while mapped(lo - P):
        lo -= P
    while mapped(hi):
        hi += P
    return ctypes.string_at(lo, hi - lo)
stack = ctypes.c_void_p.in_dll(libc, 'program_invocation_name').value
mem = region(libc.sbrk(0) - 1) + region(stack)
print(*(mem.count(b''.join(parts)) for parts in NEEDLES))
"""


def test_no_tool_command_or_host_path_in_cell_memory(snapcell, tmp_path):
    # No tool command line, work directory or cgroup path may be readable
    # in a cell's memory. The control is a string the code puts on its own heap.
    command = "cat >/dev/null; echo sc-toolcmd-marker-31337"
    needles = [[command[:10].encode(), command[10:].encode()],
               [b"/sys/fs/", b"cgroup/"], [b"sc-control", b"mark"]]
    code = (b"NEEDLES = " + repr(needles).encode() + b"\n" + SCAN_MEMORY.replace(
        b"stack = ", b"control = libc.strdup(b'sc-control' + b'mark')\nstack = ", 1))
    r = snapcell("run", "--tool", f"probe={command}", "-", stdin=code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [b"0", b"0", b"1"], r.stdout
