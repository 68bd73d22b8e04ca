"""One record of a run: `snapcell run --json` and the MCP server's _meta["snapcell/run"] come
from the same library call, so for the same run they have the same keys (the CLI adds the
allow-list as "network"; _meta leaves out stdout and stderr, which the content carries, and
the files' bytes)."""
import json
import subprocess
import sys

from test_mcp_protocol import Stdio

CODE = ("print('hi')\nopen('/output/r.txt', 'w').write('x')\n"
        "print(call_tool('double', x=2))\nimport socket\n"
        "try:\n    socket.getaddrinfo('evil.example', 443)\nexcept OSError:\n    pass\n")


def keys(record):
    """The record's keys, and those of its list items, as one set of paths."""
    out = set()
    for k, v in record.items():
        out.add(k)
        if isinstance(v, list):
            out |= {f"{k}[].{kk}" for item in v if isinstance(item, dict) for kk in item}
    return out


def test_cli_json_and_mcp_meta_have_the_same_keys(snapcell_bin, tmp_path):
    tool = [sys.executable, "-c", "import json,sys; a=json.load(sys.stdin); print(json.dumps(a['x'] * 2))"]
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"tools": [{"name": "double", "argv": tool, "description": "Doubles x."}],
                                  "allow": [{"target": "api.example.com"}]}))
    path, env = snapcell_bin
    r = subprocess.run([path, "run", "--config", str(config), "--json", "-"], input=CODE.encode(),
                       capture_output=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    cli = json.loads(r.stdout)
    s = Stdio(snapcell_bin, "--config", str(config))
    try:
        s.initialize()
        result = s.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "execute_code", "arguments": {"code": CODE}}})["result"]
    finally:
        s.close()
    meta = result["_meta"]["snapcell/run"]
    assert keys(meta) == keys(cli) - {"stdout", "stderr", "network", "network[].target",
                                      "network[].methods", "network[].path", "network[].headers",
                                      "artifacts[].base64"}
    for k in ("status", "exit_code", "signal", "limits_hit", "isolation", "network_limits_hit"):
        assert meta[k] == cli[k], k
    assert [e["kind"] for e in meta["network_events"]] == [e["kind"] for e in cli["network_events"]]
    assert meta["network_events"] and meta["tool_calls"][0]["name"] == "double"
