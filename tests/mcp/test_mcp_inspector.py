"""The MCP Inspector CLI (@modelcontextprotocol/inspector 2.12.0, installed by
scripts/install-mcp-tools) lists and calls execute_code over stdio and Streamable HTTP.
Skips only when node or npm is missing."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import ROOT, snapcell_env

TOOLS = pathlib.Path(os.environ.get("SNAPCELL_MCP_TOOLS",
                                    pathlib.Path.home() / ".cache" / "snapcell-mcp-tools"))


@pytest.fixture(scope="module")
def inspector():
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node or npm is missing")
    cli = TOOLS / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
    if not cli.exists():
        subprocess.run([str(ROOT / "scripts" / "install-mcp-tools")], check=True, timeout=600,
                       stdout=subprocess.DEVNULL)
    # The Node 22 installed beside it when there, else the one on PATH.
    node = TOOLS / "node22" / "node_modules" / ".bin" / "node"
    return [str(node) if node.exists() else shutil.which("node"), str(cli.resolve()), "--cli"]


def run(argv, *args):
    proc = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def target(transport, request):
    path, env = snapcell_env()
    if transport == "stdio":
        return ["-e", f"SNAPCELL_HELPER={env['SNAPCELL_HELPER']}", path, "mcp"]
    return [request.getfixturevalue("http_server").url, "--transport", "http"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_inspector_lists_and_calls(inspector, transport, request):
    where = target(transport, request)
    listed = run(inspector, *where, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == ["execute_code"]
    called = run(inspector, *where, "--method", "tools/call", "--tool-name", "execute_code",
                 "--tool-args-json", json.dumps({"code": "print(6*7)"}))
    assert called["isError"] is False
    assert [c["text"] for c in called["content"] if c["type"] == "text"] == ["42\n"]


def test_inspector_dash_dash_form_passes_server_options(inspector, tmp_path):
    # `--` ends the Inspector's options: what follows is the server's command line, so
    # `snapcell mcp --config FILE` keeps its --config (before `--` the Inspector would take it
    # as its own). docs/mcp.md shows this form.
    path, env = snapcell_env()
    config = tmp_path / "snapcell-mcp.json"
    config.write_text(json.dumps({"structured_content": True}))
    called = run(inspector, "-e", f"SNAPCELL_HELPER={env['SNAPCELL_HELPER']}",
                 "--method", "tools/call", "--tool-name", "execute_code",
                 "--tool-args-json", json.dumps({"code": "print(6*7)"}),
                 "--", path, "mcp", "--config", str(config))
    assert called["isError"] is False
    assert [c["text"] for c in called["content"] if c["type"] == "text"] == ["42\n"]
    assert called["structuredContent"]["status"] == "ok"  # the config was read
