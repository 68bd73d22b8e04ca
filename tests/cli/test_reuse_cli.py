"""Reset in place from the CLI: `run --reuse/--no-reuse`, `doctor`'s reuse line (the mode and
what the kernel gives), and the fallback on a kernel without what reuse needs (simulated by
tests/simhost: userfaultfd or the PAGEMAP_SCAN ioctl refused), where runs fork new cells and
doctor says so."""
import json
import os
import pathlib
import re
import subprocess

import pytest

# Which cell ran (tests/c/integration/test_reset.c): its /tmp and /output, tmpfs mounts made
# for it; and whether an earlier run's module attribute is still there.
IDENTITY = ("import os, sys\n"
            "print([(s.st_dev, s.st_ino, s.st_ctime_ns) for s in "
            "(os.stat('/tmp'), os.stat('/output'))], getattr(sys, 'left_behind', None))\n"
            "sys.left_behind = 'secret'\n")


def doctor(snapcell, *args, wrap=None):
    r = snapcell("doctor", "--json", *args) if wrap is None else wrap("doctor", "--json", *args)
    return r, json.loads(r.stdout)


def identities(wrap, tmp_path, runs=8):
    """IDENTITY's line from each of runs runs of one MCP server's sandbox with "reuse" on;
    each run must find nothing an earlier one left."""
    config = tmp_path / "snapcell.json"
    config.write_text(json.dumps({"reuse": True}))
    lines = [json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "t", "version": "1"}}}),
             json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]
    lines += [json.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                          "params": {"name": "execute_code", "arguments": {"code": IDENTITY}}})
              for i in range(runs)]
    r = wrap("mcp", "--config", str(config), stdin=("\n".join(lines) + "\n").encode())
    assert r.returncode == 0, r.stderr
    answers = [json.loads(line) for line in r.stdout.splitlines()]
    texts = [a["result"]["content"][0]["text"] for a in answers if a.get("id", 0) >= 10]
    assert len(texts) == runs, answers
    assert all(t.endswith(" None\n") for t in texts), texts
    return texts


def test_run_takes_reuse_and_no_reuse(snapcell):
    for args in (("--reuse",), ("--no-reuse",), ("--reuse", "--no-reuse")):
        r = snapcell("run", *args, "-", stdin=b"print(6 * 7)")
        assert r.returncode == 0 and r.stdout == b"42\n", (args, r.stderr)
    assert b"--no-reuse" in snapcell("run", "--help").stdout


def test_doctor_says_reuse_is_on_by_default_and_off_with_no_reuse(snapcell, host_level):
    r, report = doctor(snapcell)
    assert r.returncode == 0, r.stderr
    reuse = report["reuse"]
    assert reuse["asked"] is True, reuse
    in_use = reuse["kernel"]["available"] and host_level != "rlimits"
    assert reuse["in_use"] is in_use and report["sandbox"]["reuse"] is in_use, reuse
    assert reuse["mode"].startswith("on" if in_use else "asked for, but"), reuse
    r, report = doctor(snapcell, "--no-reuse")
    assert r.returncode == 0, r.stderr
    assert report["reuse"]["asked"] is False and report["reuse"]["in_use"] is False
    assert report["reuse"]["mode"].startswith("off")
    text = snapcell("doctor", "--no-reuse").stdout.decode()
    assert "reuse:     off: each run forks a new cell" in text, text


def test_doctor_says_reuse_is_on_where_the_kernel_gives_it(snapcell, host_level):
    r, report = doctor(snapcell, "--reuse")
    assert r.returncode == 0, r.stderr
    kernel = report["reuse"]["kernel"]
    if not kernel["available"] or host_level == "rlimits":
        pytest.skip(f"reuse unavailable here: {report['reuse']['mode']}")
    # PROCMAP_QUERY (Linux 6.11) only makes the reset's mapping check cheaper.
    release = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", os.uname().release).groups())
    assert kernel.pop("procmap_query") is (release >= (6, 11)), (kernel, release)
    assert kernel == {"userfaultfd_wp_async": True, "pagemap_scan": True,
                      "ptrace_child": True, "available": True, "detail": ""}
    assert report["reuse"]["asked"] is True and report["reuse"]["in_use"] is True
    assert report["sandbox"]["reuse"] is True
    text = snapcell("doctor", "--reuse").stdout.decode()
    assert "reuse:     on: a fresh run's cell is reset in place" in text, text
    assert ("kernel: userfaultfd write-protect yes, PAGEMAP_SCAN yes, ptrace of a child yes"
            in text), text
    assert ("mappings compared field by field (PROCMAP_QUERY)" if release >= (6, 11)
            else "mappings compared through their text") in text, text


@pytest.fixture
def simhost(snapcell_paths):
    path, helper = snapcell_paths
    exe = pathlib.Path(path).resolve().parents[1] / "tests" / "simhost"
    if not os.access(exe, os.X_OK):
        pytest.skip(f"needs {exe} (a build with -Dtests=enabled)")

    def run(option):
        def wrapped(*args, stdin=None, timeout=120):
            return subprocess.run([str(exe), option, "--", path, *args], input=stdin,
                                  capture_output=True, timeout=timeout,
                                  env={**os.environ, "SNAPCELL_HELPER": helper})
        return wrapped

    return run


@pytest.mark.parametrize("option, missing", [("--no-userfaultfd", "userfaultfd: "),
                                             ("--no-pagemap-scan", "PAGEMAP_SCAN")])
def test_without_the_kernel_features_reuse_falls_back_to_forking(simhost, option, missing,
                                                                 host_level, tmp_path):
    if host_level == "rlimits":
        pytest.skip("reuse needs level namespaces")
    wrap = simhost(option)
    r, report = doctor(None, "--reuse", wrap=wrap)
    assert r.returncode == 0, r.stderr
    reuse = report["reuse"]
    assert reuse["asked"] is True and reuse["in_use"] is False, reuse
    assert reuse["kernel"]["available"] is False and missing in reuse["kernel"]["detail"], reuse
    assert reuse["mode"] == ("asked for, but the kernel lacks what it needs: each run forks a "
                             "new cell"), reuse
    text = wrap("doctor", "--reuse").stdout.decode()
    assert "reuse:     asked for, but the kernel lacks what it needs" in text, text
    assert missing in text, text
    # Runs work, each in a newly forked cell: many runs of one sandbox (an MCP server's) with
    # "reuse" on never find an earlier run's cell, nor anything it left.
    texts = identities(wrap, tmp_path)
    assert len(set(texts)) == len(texts), texts


def test_without_procmap_query_reuse_compares_mappings_through_their_text(simhost, host_level,
                                                                          tmp_path):
    """A kernel before 6.11 (no PROCMAP_QUERY): cells are still reset in place, the mappings
    checked through the text of /proc/PID/maps, and doctor says so."""
    if host_level == "rlimits":
        pytest.skip("reuse needs level namespaces")
    wrap = simhost("--no-procmap-query")
    r, report = doctor(None, "--reuse", wrap=wrap)
    assert r.returncode == 0, r.stderr
    reuse = report["reuse"]
    assert reuse["in_use"] is True and reuse["kernel"]["available"] is True, reuse
    assert reuse["kernel"]["procmap_query"] is False, reuse
    text = wrap("doctor", "--reuse").stdout.decode()
    assert ("mappings compared through their text (/proc/PID/maps: no PROCMAP_QUERY, "
            "Linux 6.11)") in text, text
    # Some run finds an earlier run's cell, and nothing it left.
    texts = identities(wrap, tmp_path)
    assert len(set(texts)) < len(texts), texts


def test_at_level_rlimits_reuse_asked_for_forks_and_doctor_says_why(simhost):
    """A Docker-like seccomp filter leaves level rlimits (no pid namespace per cell): the
    kernel gives what reuse needs, the level does not."""
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs /usr/bin/python3 (a root caller's rlimits sandbox cannot reach a "
                    "pyenv build under /root)")
    wrap = simhost("--docker-seccomp")
    r, report = doctor(None, "--reuse", "--python", "/usr/bin/python3", wrap=wrap)
    assert report["level"] == "rlimits", report["level"]
    reuse = report["reuse"]
    assert reuse["asked"] is True and reuse["in_use"] is False, reuse
    assert reuse["mode"] == ("asked for, but not at this level (namespaces or cgroups needed): "
                             "each run forks a new cell"), reuse
    r = wrap("run", "--reuse", "--python", "/usr/bin/python3", "-", stdin=b"print(6 * 7)")
    assert r.returncode == 0 and r.stdout == b"42\n", r.stderr
