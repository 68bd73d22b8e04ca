"""Issue 9's findings as the CLI shows them: hostile tool names in the JSON call log."""
import json

RAW_CALL = (b"import os, struct\n"
            b"def call(payload):\n"
            b"    os.write(3, struct.pack('<I', 1 + len(payload)) + b'C' + payload)\n"
            b"    n = struct.unpack('<I', os.read(3, 4))[0]\n"
            b"    got = b''\n"
            b"    while len(got) < n:\n"
            b"        got += os.read(3, n - len(got))\n"
            b"call(b'\\xff\\xfeecho\\0{}')\n"
            b"call(b'echo\\0forged\\0{}')\n")


def test_hostile_tool_names_stay_in_the_json_log(snapcell):
    r = snapcell("run", "--json", "--tool", "echo=cat", "-", stdin=RAW_CALL)
    assert r.returncode == 0, r.stderr
    calls = json.loads(r.stdout)["tool_calls"]
    assert [(c["name"], c["ok"]) for c in calls] == [("\\xff\\xfeecho", False),
                                                     ("echo\\x00forged", False)]
