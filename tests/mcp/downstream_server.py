"""A downstream MCP server written with the official SDK (mcp==2.3.0, MCPServer), for the code
mode tests: snapcell mcp connects to it as a client and offers its tools to sandboxed code.

    python3 downstream_server.py                 # stdio
    python3 downstream_server.py --http PORTFILE [PORT]  # streamable HTTP on 127.0.0.1,
                                                         # the port written to PORTFILE

Tools: add (structured result), shout (text only), fail (isError), slow (sleeps), calls (how
many calls this process served: a restart starts again at 1), die (exits the process),
garbage (writes a line that is not JSON-RPC to stdout), chatter (a flood of notifications
before its answer), and search-v2 (a name that needs
sanitising in the code's tools namespace). $NOTES_VARIANT adds a tool snapcell must refuse at
startup: "clash" (search_v2, the same attribute as search-v2) or "bad_schema" (a schema
keyword outside the C subset); "environ" adds environ (the process's environment).
$NOTES_DIR adds wait (an async sleep that writes NOTES_DIR/arrived.<id> when it starts and
NOTES_DIR/cancelled.<id> when the SDK cancels it: a notifications/cancelled came for it)."""
import fcntl
import os
import socket
import subprocess
import sys
import time
from typing import Annotated

from pydantic import Field

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("notes")
served = 0
# The SDK points fd 1 at stderr while it serves stdio; garbage() writes to the wire itself.
WIRE = os.dup(1)


def count():
    global served
    served += 1
    return served


@server.tool(description="Adds two integers.")
def add(a: int, b: int) -> int:
    count()
    return a + b


@server.tool(description="The text in capitals, as plain text content.", structured_output=False)
def shout(text: str) -> str:
    count()
    return text.upper()


@server.tool(description="Always fails with the given message.", structured_output=False)
def fail(message: str) -> str:
    count()
    raise ToolError(message)


@server.tool(description="Sleeps, then answers.", structured_output=False)
def slow(seconds: float) -> str:
    count()
    time.sleep(seconds)
    return "slept"


@server.tool(description="How many calls this server process has served.")
def calls() -> int:
    return count()


@server.tool(description="Exits the server process.", structured_output=False)
def die() -> str:
    os._exit(3)


@server.tool(description="Writes a line that is not JSON-RPC to stdout.", structured_output=False)
def garbage() -> str:
    os.write(WIRE, b"this is not JSON-RPC\n")
    return "written"


@server.tool(description="Writes a 17 MiB line to stdout.", structured_output=False)
def flood() -> str:
    os.write(WIRE, b"x" * (17 << 20) + b"\n")
    return "written"


@server.tool(description="Writes a 15 MiB notification of empty objects to stdout.",
             structured_output=False)
def bomb() -> str:
    os.write(WIRE, b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":['
             + b"{}," * (5 << 20) + b"{}]}}\n")
    return "written"


@server.tool(description="Floods notifications (yes(1) on the wire) for a while, then answers.",
             structured_output=False)
def chatter(seconds: float) -> str:
    line = '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}'
    os.set_blocking(WIRE, True)
    fcntl.fcntl(WIRE, fcntl.F_SETPIPE_SZ, 1 << 20)  # a full pipe whenever snapcell reads
    flood = subprocess.Popen(["yes", line], stdout=WIRE, stderr=subprocess.DEVNULL)
    time.sleep(seconds)
    flood.kill()
    flood.wait()
    return "chattered"


@server.tool(name="search-v2", description="Finds notes that mention a word.")
def search(word: str, limit: int = 10) -> list[str]:
    count()
    notes = ["buy milk", "milk the cow", "call bob"]
    return [n for n in notes if word in n][:limit]


if os.environ.get("NOTES_VARIANT") == "clash":
    @server.tool(name="search_v2", description="Clashes with search-v2 in tools.notes.")
    def search_again(word: str) -> list[str]:
        return []

if os.environ.get("NOTES_VARIANT") == "environ":
    @server.tool(description="The environment this server was started with.")
    def environ() -> dict[str, str]:
        return dict(os.environ)

if os.environ.get("NOTES_VARIANT") == "bad_schema":
    @server.tool(description="Its schema uses 'if', which snapcell does not check.")
    def iffy(x: Annotated[str, Field(json_schema_extra={"if": {"minLength": 1}})]) -> str:
        return x


if os.environ.get("NOTES_DIR"):
    import anyio

    @server.tool(description="Sleeps without a thread, noting its start and its cancellation.",
                 structured_output=False)
    async def wait(seconds: float, id: str) -> str:
        marks = os.environ["NOTES_DIR"]
        with open(os.path.join(marks, f"arrived.{id}"), "w"):
            pass
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            with open(os.path.join(marks, f"cancelled.{id}"), "w"):
                pass
            raise
        return "waited"


if __name__ == "__main__":
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--http":
        # A free port (or the one given), then serve on it; the test waits for the port file.
        if len(sys.argv) == 4:
            port = int(sys.argv[3])
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        import threading

        def announce():
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            with open(sys.argv[2] + ".tmp", "w") as f:
                f.write(str(port))
            os.rename(sys.argv[2] + ".tmp", sys.argv[2])

        threading.Thread(target=announce, daemon=True).start()
        server.settings.log_level = "WARNING"
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()
