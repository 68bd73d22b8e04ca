"""`snapcell doctor`: every mechanism listed with a verdict, the level, and a real test run."""


def test_doctor_reports_mechanisms_level_and_a_working_sandbox(snapcell):
    r = snapcell("doctor")
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    for name in ("user namespace", "mount namespace", "pid namespace", "network namespace",
                 "ipc namespace", "uts namespace", "cgroup namespace", "seccomp filter",
                 "landlock", "cgroup limits"):
        assert name in out
    assert "level:     namespaces" in out
    assert "sandbox:   works at level 'namespaces'" in out
    assert "kernel.unprivileged_bpf_disabled" in out and "host hardening" in out
