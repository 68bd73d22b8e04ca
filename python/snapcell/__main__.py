"""The `snapcell` command a wheel installs (and `python -m snapcell`): runs the C CLI shipped
inside the package with the helper shipped beside it, and with the Python that runs this
script as the cells' interpreter (its base interpreter, as snapcell.Sandbox chooses it), unless
SNAPCELL_PYTHON, --python, a config's "python" or a venv names another. Not a second front end:
the arguments go to the C binary unchanged, and it replaces this process (an MCP client's stdio
reaches it directly)."""

import os
import sys

from snapcell._interpreter import default_python

_HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(_HERE, "snapcell")
HELPER = os.path.join(_HERE, "snapcell-cell")


def main() -> None:
    # Always the packaged helper: one from an earlier source build (SNAPCELL_HELPER in the
    # user's environment) would speak another protocol version than this CLI.
    env = dict(os.environ, SNAPCELL_HELPER=HELPER)
    if not env.get("SNAPCELL_PYTHON"):
        try:
            env["SNAPCELL_PYTHON"] = default_python()
        except ValueError:
            pass  # not a CPython (an embedding application): the CLI's own default applies
    try:
        os.execve(BINARY, ["snapcell", *sys.argv[1:]], env)
    except OSError as e:
        sys.exit(f"snapcell: cannot run {BINARY}: {e.strerror}")


if __name__ == "__main__":
    main()
