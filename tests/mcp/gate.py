"""A command tool for the MCP tests: runs call it and wait in it, so a test acts while runs
are known to be in progress instead of sleeping until they probably are."""
import json
import time


class Gate:
    """A command tool the runs wait in: each call marks its arrival (a file in dir) and waits
    until the test opens the gate, so a test knows which runs are in progress instead of
    guessing from a sleep. It gives up after 60 s so a failing test cannot hang."""
    SCRIPT = ('touch "$0/in.$$"; n=0; '
              'while [ ! -e "$0/open" ] && [ $n -lt 3000 ]; do sleep 0.02; n=$((n+1)); done; '
              'echo \'"through"\'')

    def __init__(self, tmp_path):
        self.dir = tmp_path / "gate"
        self.dir.mkdir()
        self.config = tmp_path / "config.json"
        self.config.write_text(json.dumps({"tools": [
            {"name": "gate", "argv": ["sh", "-c", self.SCRIPT, str(self.dir)]}]}))

    def arrived(self):
        return sum(1 for p in self.dir.iterdir() if p.name.startswith("in."))

    def wait_arrived(self, n, timeout=30):
        deadline = time.monotonic() + timeout
        while self.arrived() < n:
            assert time.monotonic() < deadline, f"{self.arrived()} of {n} runs reached the gate"
            time.sleep(0.02)

    def open(self):
        (self.dir / "open").touch()

    def close(self):
        """For the next runs, once every call that went through has been answered."""
        for p in self.dir.iterdir():
            p.unlink()
