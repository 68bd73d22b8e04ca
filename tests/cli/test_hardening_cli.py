"""Issue 9's findings as the CLI shows them: hostile tool names in the JSON call log."""
import json

RAW_CALL = (b"import os, struct\n"
            b"def call(payload):\n"
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
    # Issue 21: command tools inherited the MCP token and the variables an --allow-header reads.
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
