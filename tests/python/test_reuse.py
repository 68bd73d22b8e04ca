"""Reset in place from Python: Sandbox(reuse=...), Sandbox.reuse, probe()["reuse"], and the
Agent Framework adapter's reuse keyword. A reset cell is seen by its identity (its /tmp and
/output, tmpfs mounts made for each cell: tests/c/integration/test_reset.c) coming back in a
later run; nothing a run left reaches a later one either way."""
import asyncio

import pytest

import snapcell

IDENTITY = ("import os, sys, random\n"
            "print([(s.st_dev, s.st_ino, s.st_ctime_ns) for s in "
            "(os.stat('/tmp'), os.stat('/output'))])\n"
            "print(getattr(sys, 'left_behind', None), random.random())\n"
            "sys.left_behind = 'secret'\n")


def reuse_available():
    return snapcell.probe()["reuse"]["available"]


def runs(run, n=16):
    """The identities and randoms of n runs, each checked to see nothing of earlier ones."""
    ids, randoms = [], []
    for _ in range(n):
        out = run(IDENTITY)
        ident, rest = out.splitlines()
        left, number = rest.split()
        assert left == "None", out
        ids.append(ident)
        randoms.append(number)
    assert len(set(randoms)) == n, randoms  # re-seeded in every run, reset or forked
    return ids


def sandbox_runs(sb):
    def run(code):
        r = sb.run(code)
        assert r.status == "ok", r
        return r.stdout

    return runs(run)


def test_probe_says_what_the_kernel_gives_reuse():
    reuse = snapcell.probe()["reuse"]
    assert set(reuse) == {"userfaultfd_wp_async", "pagemap_scan", "ptrace_child", "available",
                          "procmap_query", "detail"}
    assert reuse["available"] == (reuse["userfaultfd_wp_async"] and reuse["pagemap_scan"]
                                  and reuse["ptrace_child"])
    assert (reuse["detail"] == "") == reuse["available"]


def test_reuse_true_resets_cells_in_place():
    if not reuse_available():
        pytest.skip(f"reuse unavailable here: {snapcell.probe()['reuse']['detail']}")
    with snapcell.Sandbox(reuse=True) as sb:
        if sb.isolation == "rlimits":
            pytest.skip("reuse needs level namespaces")
        assert sb.reuse is True
        ids = sandbox_runs(sb)
    assert len(set(ids)) < len(ids), ids


def test_without_reuse_every_run_forks_a_cell():
    with snapcell.Sandbox(reuse=False) as sb:
        assert sb.reuse is False
        ids = sandbox_runs(sb)
    assert len(set(ids)) == len(ids), ids


@pytest.mark.parametrize("kwargs", [{}, {"reuse": None}])
def test_reuse_is_on_by_default_where_the_kernel_gives_it(kwargs):
    with snapcell.Sandbox(**kwargs) as sb:
        reuse = sb.reuse
        assert reuse is (reuse_available() and sb.isolation != "rlimits")
        ids = sandbox_runs(sb)
    if reuse:
        assert len(set(ids)) < len(ids), ids
    else:
        assert len(set(ids)) == len(ids), ids


def test_reuse_must_be_a_bool():
    with pytest.raises(TypeError, match="reuse is True, False or None"):
        snapcell.Sandbox(reuse="yes")
    with pytest.raises(TypeError, match="reuse is True, False or None"):
        snapcell.Sandbox(reuse=1)


def test_agent_framework_reuse_keyword():
    pytest.importorskip("agent_framework")
    from snapcell.agent_framework import CodeActProvider, ExecuteCodeTool

    def tool_runs(t):
        def run(code):
            return "".join(c.text for c in asyncio.run(t.invoke(arguments={"code": code}))
                           if c.type == "text")

        return runs(run)

    with ExecuteCodeTool(reuse=False) as t:
        ids = tool_runs(t)
        assert len(set(ids)) == len(ids), ids
    with pytest.raises(TypeError, match="reuse is True, False or None"):
        ExecuteCodeTool(reuse="on")
    if not reuse_available():
        pytest.skip("reuse unavailable here")
    with ExecuteCodeTool(reuse=True) as t:
        ids = tool_runs(t)
        assert len(set(ids)) < len(ids), ids
    provider = CodeActProvider(reuse=True)
    assert provider._execute_code_tool._settings.reuse is True
