"""Runs the MCP conformance suite (@modelcontextprotocol/conformance) against
`snapcell mcp --http` for one protocol era and judges it from each scenario's checks.json.

    python3 tests/mcp/conformance.py --era handshake|stateless --node NODE --suite JS

Every scenario the suite runs is either one that applies to a server with one tool, resources
only as results' links, and no prompts or logging (it must pass: no FAILURE check except the exempt
ones below) or one listed as not applying, with the reason (docs/mcp.md has the same lists).
A scenario in neither list fails the run, so a new suite release is looked at, not trusted.
Passes of scenarios that do not apply are never counted: some pass without the fixture tools
they are about. Prints one line; the suite's own output goes to a log shown on failure."""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

FIXTURE = "calls the suite's fixture tools (test_*), which a server whose one tool is execute_code does not have"
NO_PROMPTS = "no prompts capability"
FIXTURE_RESOURCES = ("reads the suite's fixture resources (test://static-text, ...); snapcell's only "
                     "resources are results' links (resource_link items of a streamed call), "
                     "tested in tests/mcp/test_mcp_big_results.py")
NO_SUBSCRIBE = "no resources subscribe capability (a link never changes)"

ERAS = {
    "handshake": {
        "args": [],
        "applies": {"server-initialize", "ping", "tools-list", "dns-rebinding-protection",
                    "server-sse-multiple-streams", "resources-list"},
        "exempt": {},
        "not_applicable": {
            "logging-set-level": "no logging capability (logs go to stderr)",
            "completion-complete": "no prompts or resource templates, so nothing to complete",
            # snapcell's own elicitation/create (per-call approval) is tested in
            # test_mcp_approval.py with the SDK client; these ask from the suite's fixture tools.
            "elicitation-sep1034-defaults": "server-initiated elicitation from a fixture tool",
            "elicitation-sep1330-enums": "server-initiated elicitation from a fixture tool",
            **{f"tools-call-{n}": FIXTURE for n in (
                "simple-text", "image", "audio", "embedded-resource", "mixed-content",
                "with-logging", "error", "with-progress", "sampling", "elicitation")},
            **{f"resources-{n}": FIXTURE_RESOURCES for n in (
                "read-text", "read-binary", "templates-read")},
            "resources-subscribe": NO_SUBSCRIBE,
            "resources-unsubscribe": NO_SUBSCRIBE,
            **{f"prompts-{n}": NO_PROMPTS for n in (
                "list", "get-simple", "get-with-args", "get-embedded-resource", "get-with-image")},
        },
    },
    "stateless": {
        "args": ["--requirements", "2026-07-28"],
        "applies": {"server-stateless", "tools-list", "dns-rebinding-protection",
                    "server-sse-multiple-streams", "http-header-validation", "caching",
                    "sep-2164-resource-not-found", "resources-list",
                    "input-required-result-unsupported-methods"},
        "exempt": {
            "sep-2575-server-rejects-undeclared-capability":
                "needs the fixture tool test_missing_capability; execute_code requires no client capability, so -32021 never arises",
            "sep-2575-missing-capability-http-400": "the same fixture tool",
            "sep-2575-http-server-no-independent-requests-on-stream":
                "needs the fixture tool test_streaming_elicitation; snapcell sends no requests in this era (it asks with input_required results)",
            "sep-2575-server-no-log-without-loglevel":
                "needs the fixture tool test_logging_tool; snapcell never sends notifications/message",
            "sep-2549-prompts-list-caching-hints": NO_PROMPTS,
        },
        "not_applicable": {
            "completion-complete": "no prompts or resource templates, so nothing to complete",
            "json-schema-2020-12": FIXTURE,
            "http-custom-header-server-validation": "needs a tool with x-mcp-header annotations; execute_code has none",
            **{f"tools-call-{n}": FIXTURE for n in (
                "simple-text", "image", "audio", "embedded-resource", "mixed-content", "error",
                "with-progress")},
            **{f"resources-{n}": FIXTURE_RESOURCES for n in (
                "read-text", "read-binary", "templates-read")},
            **{f"prompts-{n}": NO_PROMPTS for n in (
                "list", "get-simple", "get-with-args", "get-embedded-resource", "get-with-image")},
        },
        # Multi round-trip requests from fixture tools (snapcell's own input_required, per-call
        # approval, is tested in test_mcp_approval.py: shape, re-asking, tampered, replayed and
        # foreign requestStates) and the tasks extension (not advertised); several pass without
        # their fixtures.
        "not_applicable_prefixes": {
            "input-required-result-": "multi round-trip requests from fixture tools (test_input_required_result_*), which a server whose one tool is execute_code does not have",
            "tasks-": "the tasks extension, which snapcell does not advertise",
        },
    },
}


def start_server(snapcell, helper, log):
    env = {**os.environ, "SNAPCELL_HELPER": helper}
    proc = subprocess.Popen([snapcell, "mcp", "--http", "127.0.0.1:0"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=log, env=env)
    end = time.monotonic() + 30
    while time.monotonic() < end and proc.poll() is None:
        for line in pathlib.Path(log.name).read_text().splitlines():
            if "listening on http://" in line:
                return proc, int(line.rsplit(":", 1)[1].split("/")[0])
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("snapcell mcp --http did not start: " + pathlib.Path(log.name).read_text())


def not_applicable(era, scenario):
    if scenario in era["not_applicable"]:
        return era["not_applicable"][scenario]
    for prefix, why in era.get("not_applicable_prefixes", {}).items():
        if scenario.startswith(prefix):
            return why
    return None


def judge(era, out):
    """(passed scenarios, not-applicable count, problems)"""
    seen, problems, passed, na = set(), [], 0, 0
    for d in sorted(out.iterdir()):
        checks = d / "checks.json"
        if not checks.exists():
            continue
        name = re.sub(r"^server-", "", re.sub(r"-\d{4}-\d\d-\d\dT.*$", "", d.name))
        seen.add(name)
        if name not in era["applies"]:
            if not_applicable(era, name):
                na += 1
            else:
                problems.append(f"{name}: a scenario this run does not know; classify it")
            continue
        bad = [c for c in json.loads(checks.read_text())
               if c.get("status") == "FAILURE" and c.get("id") not in era["exempt"]]
        for c in bad:
            problems.append(f"{name}: {c.get('id')}: {(c.get('errorMessage') or '')[:300]}")
        passed += not bad
    for name in sorted(era["applies"] - seen):
        problems.append(f"{name}: did not run")
    return passed, na, problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--era", choices=ERAS, required=True)
    ap.add_argument("--node", required=True)
    ap.add_argument("--suite", required=True, help="the package's dist/index.js")
    ap.add_argument("--snapcell", default=str(ROOT / "build" / "cli" / "snapcell"))
    ap.add_argument("--helper", default=str(ROOT / "build" / "snapcell-cell"))
    a = ap.parse_args()
    era = ERAS[a.era]
    with tempfile.TemporaryDirectory(prefix="snapcell-conformance-") as tmp, \
            open(pathlib.Path(tmp) / "server.log", "w+") as log:
        proc, port = start_server(a.snapcell, a.helper, log)
        out = pathlib.Path(tmp) / "out"
        try:
            run = subprocess.run([a.node, a.suite, "server", "--url", f"http://127.0.0.1:{port}/mcp",
                                  *era["args"], "-o", str(out)], cwd=tmp, capture_output=True,
                                 text=True, timeout=1200)
        finally:
            proc.terminate()
            proc.wait(timeout=15)
        passed, na, problems = judge(era, out) if out.exists() else (0, 0, ["no results"])
        if proc.returncode != 0:
            problems.append(f"the server exited {proc.returncode}")
        if problems:
            print(run.stdout[-4000:], run.stderr[-2000:], sep="\n")
            print("\n".join(problems))
        print(f"conformance {a.era} era: {passed} of {len(era['applies'])} applicable scenarios "
              f"pass, {na} do not apply, {len(problems)} problems")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
