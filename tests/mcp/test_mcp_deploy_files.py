"""deploy/ stays in step with the code it deploys. The image cannot be built here (no image
registry is reachable) and there is no cluster, so these check what can be checked without
them: the Kubernetes manifests parse and keep the properties docs/deploy.md promises, every
snapcell option they and the Dockerfile pass exists, the image's config loads, haproxy
accepts both configs, and the Kubernetes haproxy keeps the affinity test_mcp_scaleout.py
tests on deploy/haproxy/haproxy.cfg. The Dockerfile's build packages are a subset of what
scripts/install-deps installs (what building needs, without the test tools)."""
import json
import os
import pathlib
import re
import shutil
import subprocess

import yaml

from conftest import HttpServer, snapcell_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def docs(name):
    return list(yaml.safe_load_all((DEPLOY / "kubernetes" / name).read_text()))


def kind(items, k):
    return [d for d in items if d["kind"] == k]


def mcp_options():
    path, env = snapcell_env()
    out = subprocess.run([path, "mcp", "--help"], capture_output=True, text=True, env=env).stdout
    return set(re.findall(r"--[a-z][a-z-]*", out))


def test_deployment_properties():
    items = docs("snapcell-mcp.yaml")
    (dep,) = kind(items, "Deployment")
    spec = dep["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert dep["spec"]["replicas"] >= 2
    assert c["readinessProbe"]["exec"]["command"] == ["snapcell", "doctor"]
    # The liveness probe asks for /healthz: a TCP connect succeeds into the listen queue of a
    # server whose connection slots are all held.
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "mcp"}
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["privileged"] is False
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {s["spec"].get("clusterIP") for s in kind(items, "Service")} == {"None"}
    # Every option passed exists.
    options = mcp_options()
    assert {a.split("=")[0] for a in c["args"]} <= options
    # The ConfigMap's config loads.
    (cm,) = kind(items, "ConfigMap")
    json.loads(cm["data"]["mcp.json"])


def test_dockerfile():
    text = (DEPLOY / "Dockerfile").read_text()
    check = json.loads(re.search(r"^HEALTHCHECK .*?CMD (.*)$", text, re.M).group(1))
    assert check[:2] == ["sh", "-c"] and check[2].startswith("snapcell doctor")
    assert "http://127.0.0.1:8765/healthz" in check[2]
    assert "FROM debian:12" in text and "--privileged" not in text
    entry = json.loads(re.search(r"^ENTRYPOINT (.*)$", text, re.M).group(1))
    assert entry[:2] == ["snapcell", "mcp"]
    assert {a for a in entry if a.startswith("--")} <= mcp_options()
    build = re.search(r"FROM debian:12 AS build\n(.*?)\nFROM", text, re.S).group(1)
    wanted = set(re.search(r"--no-install-recommends(.*?)&&", build, re.S).group(1).split()) - {"\\"}
    installed = set((ROOT / "scripts" / "install-deps").read_text().split())
    assert wanted and wanted <= installed, wanted - installed


def test_image_config_loads_and_serves():
    # The config the image runs with, on this Debian 12 machine.
    server = HttpServer("--config", str(DEPLOY / "mcp.json"))
    server.stop()
    assert server.proc.returncode == 0


def test_haproxy_configs_are_valid_and_agree():
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    env = {**os.environ, "SNAPCELL_LB_BIND": "127.0.0.1:1", "SNAPCELL_REPLICA_1": "127.0.0.1:2",
           "SNAPCELL_REPLICA_2": "127.0.0.1:3"}
    shipped = DEPLOY / "haproxy" / "haproxy.cfg"
    subprocess.run([haproxy, "-c", "-f", str(shipped)], env=env, check=True, capture_output=True)
    (cm,) = kind(docs("haproxy.yaml"), "ConfigMap")
    k8s = cm["data"]["haproxy.cfg"]
    check = subprocess.run([haproxy, "-c", "-f", "/dev/stdin"], input=k8s, text=True,
                           capture_output=True)
    assert check.returncode == 0, check.stdout + check.stderr

    def affinity(cfg):
        return [l.strip() for l in cfg.splitlines()
                if l.strip().startswith(("stick", "balance", "option", "timeout"))]

    assert affinity(k8s) == affinity(shipped.read_text())
