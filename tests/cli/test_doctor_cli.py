"""`snapcell doctor`: every mechanism listed with a verdict, the level, a real test run, and
with --preload what a preloaded module costs."""
import json
import os
import uuid


def can_make_a_memory_cgroup():
    """Whether this process may make a cgroup v1 memory cgroup below its own, found without
    snapcell: its cgroup from /proc/self/cgroup, the hierarchy's mount from
    /proc/self/mountinfo, then a child made and removed there."""
    with open("/proc/self/cgroup") as f:
        own = [line.rstrip("\n").split(":", 2) for line in f]
    own = [path for _, ctrls, path in own if "memory" in ctrls.split(",")]
    if not own:
        return False
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields, _, tail = line.partition(" - ")
            root, mount = fields.split()[3:5]
            fstype, _, opts = tail.split()[:3]
            if fstype != "cgroup" or "memory" not in opts.split(","):
                continue
            rel = own[0][len(root.rstrip("/")):] if own[0].startswith(root.rstrip("/")) else None
            if rel is None:
                return False
            child = os.path.join(mount + rel, f"doctor-test-{uuid.uuid4().hex[:8]}")
            try:
                os.mkdir(child)
            except OSError:
                return False
            os.rmdir(child)
            return True
    return False


def test_doctor_reports_mechanisms_level_and_a_working_sandbox(snapcell):
    r = snapcell("doctor")
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    for name in ("user namespace", "mount namespace", "pid namespace", "network namespace",
                 "ipc namespace", "uts namespace", "cgroup namespace", "seccomp filter",
                 "landlock", "cgroup limits"):
        assert name in out
    # The level, from what this process may do (not from the report): cgroups where it may
    # make a memory cgroup, and then the mechanism is marked used.
    level = "cgroups" if can_make_a_memory_cgroup() else "namespaces"
    assert f"level:     {level}" in out, out
    assert ("cgroup limits      yes used" in out) == (level == "cgroups"), out
    assert f"sandbox:   works at level '{level}'" in out
    if os.geteuid() == 0:  # the v1 memory hierarchy is root's on the machines we target
        assert level == "cgroups", out
    assert "kernel.unprivileged_bpf_disabled" in out and "host hardening" in out


def test_doctor_json_measures_each_preload_against_none(snapcell):
    r = snapcell("doctor", "--json", "--preload", "decimal", "--preload", "no_such_module_x")
    assert r.returncode == 1, r.stderr  # the bad module fails the report
    d = json.loads(r.stdout)
    assert {m["name"] for m in d["mechanisms"]} >= {"seccomp filter", "landlock"}
    assert d["level"] in ("namespaces", "cgroups") and d["sandbox"]["fresh_run_us"] > 0
    assert d["sandbox"]["cold_start_us"] > 0 and d["sandbox"]["template_private_bytes"] > 0
    good, bad = d["preloads"]
    assert good["module"] == "decimal" and good["template_private_bytes"] > 0
    assert "extra_template_private_bytes" in good and "extra_cold_start_us" in good
    assert bad == {"module": "no_such_module_x",
                   "error": "template setup: preload no_such_module_x: ModuleNotFoundError: "
                            "No module named 'no_such_module_x'"}
    assert snapcell("doctor", "--json").returncode == 0
    assert snapcell("doctor", "extra").returncode == 2


def test_doctor_shows_the_words_of_a_helper_that_cannot_start(snapcell, snapcell_paths):
    import pathlib
    loader = pathlib.Path(snapcell_paths[1]).parent / "tests" / "dying-helper-loader"
    words = ("snapcell-cell: error while loading shared libraries: libpython3.11.so.1.0: "
             "cannot open shared object file: No such file or directory")
    r = snapcell("doctor", env={"SNAPCELL_HELPER": str(loader)})
    assert r.returncode == 1, r.stderr
    assert (f"sandbox:   FAILED: helper {loader} exited with status 127 before its greeting: "
            f"{words}\n") in r.stdout.decode()
    r = snapcell("doctor", "--json", env={"SNAPCELL_HELPER": str(loader)})
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["sandbox"] == {
        "error": f"helper {loader} exited with status 127 before its greeting: {words}"}


def test_doctor_says_whether_the_probe_cache_answered(snapcell, tmp_path):
    """The interpreter's answers are kept per user (docs/security.md, "The probe cache"): the
    first process runs the interpreter and stores its answer, the next reads it, and
    SNAPCELL_PROBE_CACHE=0 turns the cache off."""
    import shutil
    python = shutil.which("python3", path="/usr/bin") or "/usr/bin/python3"
    if not os.access(python, os.X_OK):
        import pytest
        pytest.skip("no /usr/bin/python3")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    states = []
    for _ in range(2):
        r = snapcell("doctor", "--json", "--python", python, env=env)
        assert r.returncode == 0, r.stderr
        states.append(json.loads(r.stdout)["python"]["probe_cache"])
    assert states == ["stored", "used"]
    assert list((tmp_path / "cache" / "snapcell").glob("probe-*.json"))
    r = snapcell("doctor", "--python", python, env=env)
    assert ("probe:     answered from the per-user cache (the interpreter did not run)\n"
            in r.stdout.decode()), r.stdout.decode()
    r = snapcell("doctor", "--python", python, env={**env, "SNAPCELL_PROBE_CACHE": "0"})
    assert ("probe:     the interpreter ran (the cache is off: SNAPCELL_PROBE_CACHE=0)\n"
            in r.stdout.decode()), r.stdout.decode()
