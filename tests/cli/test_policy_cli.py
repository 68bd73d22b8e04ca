"""`snapcell run --allow`, `--describe` and `--instructions`: the allow-list and the text a
model would be told, as the C library builds them."""
import json


def test_allow_entries_are_normalised_in_json_output(snapcell):
    r = snapcell("run", "--json", "--allow", "https://API.Example.com/v1=get, post,GET",
                 "--allow", "127.0.0.1:8080", "--allow", "api.example.com=PATCH", "-",
                 stdin=b"print(1)")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["network"] == [
        {"target": "127.0.0.1:8080", "methods": None, "path": None, "headers": []},
        {"target": "api.example.com", "methods": ["PATCH"], "path": None, "headers": []},
        {"target": "https://api.example.com/v1", "methods": ["GET", "POST"], "path": "/v1",
         "headers": []},
    ]


def test_allow_forms_and_headers_in_json_output(snapcell, tmp_path, monkeypatch):
    token = tmp_path / "token"
    token.write_text("file-s3cret\n")
    monkeypatch.setenv("SC_CLI_TOKEN", "env-s3cret")
    r = snapcell("run", "--allow", "*.Example.com:8443", "--allow", "[::1]:8080",
                 "--allow", "https://b\u00fccher.de/a=GET",
                 "--allow-header", "https://xn--bcher-kva.de/a=Authorization:  Bearer ${env:SC_CLI_TOKEN} ",
                 "--allow-header", f"https://xn--bcher-kva.de/a=X-Key: ${{file:{token}}}",
                 "--allow-header", "[::1]:8080=X-Cost: $$5",
                 "--describe")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "- *.example.com:8443: all methods\n" in text
    assert "- [::1]:8080: all methods (the host adds the X-Cost header)\n" in text
    assert ("- https://xn--bcher-kva.de/a: GET (the host adds the Authorization and X-Key "
            "headers)\n") in text
    assert b"s3cret" not in r.stdout and b"$5" not in r.stdout
    r = snapcell("run", "--json", "--allow", "[::1]:8080", "--allow-header",
                 "[::1]:8080=Authorization: Bearer ${env:SC_CLI_TOKEN}", "-", stdin=b"print(1)")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["network"] == [
        {"target": "[::1]:8080", "methods": None, "path": None, "headers": ["Authorization"]},
    ]
    assert b"s3cret" not in r.stdout and b"s3cret" not in r.stderr


def test_headers_on_an_http_entry_are_refused(snapcell, monkeypatch):
    # Credentials never travel in cleartext, so an entry written
    # http:// takes no headers (a bare host does: the gate adds them over TLS only).
    monkeypatch.setenv("SC_CLI_TOKEN", "env-s3cret")
    for target in ("http://api.example.com", "http://api.example.com/v1"):
        r = snapcell("run", "--allow", target, "--allow-header",
                     f"{target}=Authorization: Bearer ${{env:SC_CLI_TOKEN}}", "-",
                     stdin=b"print(1)")
        assert r.returncode == 2, target
        assert b"allowed as http://" in r.stderr and b"cleartext" in r.stderr, r.stderr
        assert b"s3cret" not in r.stderr
    for target in ("api.example.com", "api.example.com:80", "https://api.example.com/v1"):
        r = snapcell("run", "--allow", target, "--allow-header",
                     f"{target}=Authorization: Bearer ${{env:SC_CLI_TOKEN}}", "-",
                     stdin=b"print(1)")
        assert r.returncode == 0, (target, r.stderr)


def test_bad_allow_headers_are_usage_errors(snapcell, tmp_path, monkeypatch):
    monkeypatch.delenv("SC_CLI_UNSET", raising=False)
    big = tmp_path / "big"
    big.write_bytes(b"k" * 9000)
    for arg, why in [("x.example=Authorization", b"wants TARGET=NAME: VALUE"),
                     ("x.example", b"wants TARGET=NAME: VALUE"),
                     ("y.example=X-A: 1", b"no such target (allow it first)"),
                     ("x.example=Host: y", b"sets or refuses this header"),
                     ("x.example=X A: y", b"not an HTTP token"),
                     ("x.example=X-A: ${env:SC_CLI_UNSET}", b"SC_CLI_UNSET}: the variable is not set"),
                     (f"x.example=X-A: ${{file:{tmp_path / 'none'}}}", b"No such file"),
                     (f"x.example=X-A: ${{file:{big}}}", b"larger than 8192 bytes"),
                     ("x.example=X-A: $5", b"$$"),
                     ("x.example=X-A:   ", b"value empty")]:
        r = snapcell("run", "--allow", "x.example", "--allow-header", arg, "-", stdin=b"print(1)")
        assert r.returncode == 2, arg
        assert why in r.stderr, (arg, r.stderr)


def test_bad_allow_entries_are_usage_errors(snapcell):
    for arg, why in [("user@example.com", b"user@host"), ("example.com:99999", b"bad port"),
                     ("example.com=", b"empty method"), ("example.com=GET,PO ST", b"whitespace"),
                     ("", b"empty target"), ("127.1", b"dotted quad (127.0.0.1)"),
                     ("ftp://example.com", b"scheme 'ftp' is not supported"),
                     ("evil\\@allowed", b"backslash"), ("evil#@allowed", b"fragment"),
                     ("https://example.com/v1/../admin", b"'..' segment"),
                     ("https://example.com/v1%2fadmin", b"percent-encodes '/'"),
                     ("*.com", b"at least two labels")]:
        r = snapcell("run", "--allow", arg, "-", stdin=b"print(1)")
        assert r.returncode == 2, arg
        assert why in r.stderr, (arg, r.stderr)


def test_code_without_entries_is_told_it_has_no_network(snapcell):
    r = snapcell("run", "-",
                 stdin=b"import urllib.request\nurllib.request.urlopen('https://api.example.com/')")
    assert r.returncode == 1
    assert (b"cannot resolve 'api.example.com': network access is not available in this "
            b"sandbox: its configuration allows no network target") in r.stderr


def test_describe_lists_tools_files_and_network(snapcell, tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n")
    r = snapcell("run", "--tool", "fx_rate=cat", "--input", f"{tmp_path / 'data.csv'}:sales.csv",
                 "--allow", "https://api.example.com/v1=post,get", "--describe")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "`call_tool(name, **kwargs)`" in text
    assert "- fx_rate: A command on the host.\n    (any keyword arguments)\n" in text
    assert "- Mounted paths:\n  - /input/sales.csv\n" in text
    assert "- https://api.example.com/v1: GET, POST\n" in text
    assert snapcell("run", "--describe=json", "--tool", "t=cat").stdout.count(
        b"parameters (JSON Schema): {\"type\":\"object\"}") == 1
    assert snapcell("run", "--describe=yaml").returncode == 2


def test_instructions_name_no_tool(snapcell):
    r = snapcell("run", "--tool", "fx_rate=cat", "--instructions")
    assert r.returncode == 0, r.stderr
    assert b"execute_code" in r.stdout and b"print(...)" in r.stdout
    assert b"fx_rate" not in r.stdout and b"/output" not in r.stdout
    r = snapcell("run", "--workspace", "/etc", "--instructions")
    assert b"/output/<file>" in r.stdout


def test_tool_command_never_reaches_the_description_or_the_cell(snapcell):
    """A secret on a --tool command line must not reach the model (the description) nor the
    code (tool descriptions travel into the cell)."""
    secret = "TOKEN=sk-live-9f8e7d6c5b4a"
    cmd = f"curl -H 'Authorization: {secret}' https://internal.example/x"
    for fmt in ("--describe", "--describe=json"):
        r = snapcell("run", "--tool", f"fx={cmd}", fmt)
        assert r.returncode == 0, r.stderr
        assert b"fx" in r.stdout
        assert b"sk-live" not in r.stdout and b"curl" not in r.stdout, r.stdout
    code = b"import tools, gc\nprint(repr(tools.fx.__doc__))\nprint(any('sk-live' in o for o in gc.get_objects() if isinstance(o, str)))\n"
    r = snapcell("run", "--tool", f"fx={cmd}", "-", stdin=code)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"'A command on the host.'\nFalse\n", r.stdout
