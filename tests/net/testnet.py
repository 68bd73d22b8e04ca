"""Test hosts for the egress gate: a network namespace joined to this one by a veth pair,
with addresses on that pair only (a /30 of 198.51.100.0/24, TEST-NET-2, chosen by the
process id so concurrent test runs do not collide; nothing routes it off the machine), running echo_server.py on HTTP 80, HTTPS 443 (a certificate from a test CA for
*.example.test, example.test and the address) and HTTPS 8443 (a certificate from another,
untrusted CA). Names reach it through the config's host map, never DNS. Needs root."""
import os
import pathlib
import subprocess
import time

HERE = pathlib.Path(__file__).resolve().parent

NAMES = ["api.example.test", "a.example.test", "x.b.example.test", "example.test",
         "other.example.test"]


def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


def _ca(dir, name, sans):
    """A CA and a leaf it signed for sans; returns (ca.pem, leaf.pem, leaf.key). Both carry
    what Python 3.13's default context (VERIFY_X509_STRICT) requires: the CA's key usage, the
    leaf's key identifiers."""
    ca_key, ca_pem = dir / f"{name}-ca.key", dir / f"{name}-ca.pem"
    key, csr, pem = dir / f"{name}.key", dir / f"{name}.csr", dir / f"{name}.pem"
    ext = dir / f"{name}.ext"
    _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", ca_key, "-out", ca_pem, "-days", "2", "-subj",
         f"/CN=snapcell test {name} CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    _run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", key, "-out", csr, "-subj", "/CN=example.test")
    ext.write_text("subjectAltName=" + ",".join(sans) + "\n"
                   "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
                   "keyUsage=critical,digitalSignature\nsubjectKeyIdentifier=hash\n"
                   "authorityKeyIdentifier=keyid,issuer\n")
    _run("openssl", "x509", "-req", "-in", csr, "-CA", ca_pem, "-CAkey", ca_key,
         "-CAcreateserial", "-out", pem, "-days", "2", "-extfile", ext)
    return ca_pem, pem, key


class TestNet:
    def __init__(self, workdir):
        self.dir = pathlib.Path(workdir)
        tag = f"{os.getpid() % 100000}"
        self.ns, self.veth = f"sc-test-{tag}", f"sct{tag}"
        base = 4 * (os.getpid() % 63)
        self.host_addr, self.peer = f"198.51.100.{base + 1}", f"198.51.100.{base + 2}"
        sans = ["DNS:*.example.test", "DNS:example.test", f"IP:{self.peer}"]
        self.ca, cert, key = _ca(self.dir, "trusted", sans)
        self.untrusted_ca, bad_cert, bad_key = _ca(self.dir, "untrusted", sans)
        _run("ip", "netns", "add", self.ns)
        try:
            _run("ip", "link", "add", self.veth + "h", "type", "veth", "peer", "name",
                 self.veth + "n", "netns", self.ns)
            _run("ip", "addr", "add", self.host_addr + "/30", "dev", self.veth + "h")
            _run("ip", "link", "set", self.veth + "h", "up")
            for cmd in (("ip", "addr", "add", self.peer + "/30", "dev", self.veth + "n"),
                        ("ip", "link", "set", self.veth + "n", "up"),
                        ("ip", "link", "set", "lo", "up")):
                _run("ip", "netns", "exec", self.ns, *cmd)
            self.server = subprocess.Popen(
                ["ip", "netns", "exec", self.ns, "/usr/bin/python3", str(HERE / "echo_server.py"),
                 self.peer, "80", "443", cert, key, "8443", bad_cert, bad_key],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if self.server.stdout.readline().strip() != "ready":
                raise RuntimeError("echo server: " + self.server.stderr.read())
        except BaseException:
            self.close()
            raise

    def map_args(self, names=NAMES):
        """CLI arguments mapping the test names to the test host."""
        out = []
        for n in names:
            out += ["--map-host", f"{n}={self.peer}"]
        return out

    def close(self):
        server = getattr(self, "server", None)
        if server:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", self.veth + "h"], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        time.sleep(0.05)
