# Trusted code the template runs once, before any untrusted code: it defines how a cell runs
# the user's code and reports how it ended. Untrusted code can rewrite these objects in its own
# cell, which only changes that cell's own report; the host derives the status it trusts from
# the exit status.
import atexit
import gc
import io
import linecache
import os
import sys
import threading
import traceback

# enum snapcell_status and SNAPCELL_HIT_* (include/snapcell.h)
OK, ERROR, MEMORY = 0, 1, 3
HIT_MEMORY, HIT_PROCESSES, HIT_FILE_SIZE, HIT_TMP = 1 << 2, 1 << 3, 1 << 4, 1 << 5
FILENAME = "<cell>"


def _limit_flags(exc):
    """Which limit an exception (or one in its chain) comes from."""
    flags, seen = 0, set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, MemoryError):
            flags |= HIT_MEMORY
        elif isinstance(exc, OSError):
            if exc.errno == 27:  # EFBIG: RLIMIT_FSIZE
                flags |= HIT_FILE_SIZE
            elif exc.errno == 28:  # ENOSPC: the /tmp tmpfs is full
                flags |= HIT_TMP
            elif exc.errno == 11 and "fork" in "".join(traceback.format_tb(exc.__traceback__)):
                flags |= HIT_PROCESSES
        elif isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
            flags |= HIT_PROCESSES
        exc = exc.__cause__ or exc.__context__
    return flags


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish():
    """What the interpreter does at exit: join non-daemon threads, run atexit, flush."""
    try:
        threading._shutdown()
    except BaseException:
        pass
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def run(source):
    """Runs source as __main__; returns (status, exit code, limit flags)."""
    main = sys.modules["__main__"].__dict__
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    linecache.cache[FILENAME] = (len(text), None, text.splitlines(True), FILENAME)
    status, code, flags = OK, 0, 0
    try:
        exec(compile(source, FILENAME, "exec"), main)
    except SystemExit as e:
        code = _exit_code(e)
        status = OK if code == 0 else ERROR
    except BaseException as e:
        flags = _limit_flags(e)
        status, code = (MEMORY if flags & HIT_MEMORY else ERROR), 1
        e.__traceback__ = e.__traceback__.tb_next  # drop this function's frame
        try:
            traceback.print_exception(e)
        except BaseException:
            print(f"{type(e).__name__}: (traceback unavailable)", file=sys.stderr)
    _finish()
    return status, code, flags


_WARMUP = """
import json, re, collections
data = {"a": [1, 2.5, "x", None, True], "b": {"c": "d" * 20}}
text = json.dumps(data, indent=1)
assert json.loads(text) == data
print(sum(len(m.group(0)) for m in re.finditer(r"\\w+", text)), collections.Counter(text)["a"])
"""


def warm():
    """Touches what a typical run touches, so a parked cell pays its copy-on-write faults
    before a request instead of during one. Output goes nowhere."""
    saved = sys.stdout
    sys.stdout = io.StringIO()
    try:
        exec(compile(_WARMUP, "<warmup>", "exec"), {"__name__": "__warmup__"})
        try:
            raise ValueError("warm")
        except ValueError as e:
            traceback.format_exception(e)
    finally:
        sys.stdout = saved


def freeze():
    gc.collect()
    gc.freeze()
