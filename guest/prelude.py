# Trusted code the template runs once, before any untrusted code: it defines how a cell runs
# the user's code and reports how it ended. Untrusted code can rewrite these objects in its own
# cell, which only changes that cell's own report; the host derives the status it trusts from
# the exit status.
#
# Only cheap modules at the top: the template parks a sandbox's first cell before it imports
# the common standard library (guest/python.c), so that cell must not wait for traceback or
# linecache (re, enum, tokenize, ...: about 10 ms). They are imported where they are used; so
# is os (posixpath, stat, _collections_abc: ~1 ms), which a run's own path does not need.
import atexit
import gc
import io
import sys

# enum snapcell_status, SNAPCELL_HIT_*, enum snapcell_value_state and SNAPCELL_VALUE_MAX_BYTES
# (include/snapcell.h)
OK, ERROR, MEMORY = 0, 1, 3
HIT_MEMORY, HIT_PROCESSES, HIT_FILE_SIZE, HIT_TMP = 1 << 2, 1 << 3, 1 << 4, 1 << 5
VALUE_PRESENT, VALUE_NO_EXPRESSION, VALUE_NONE, VALUE_NOT_JSON, VALUE_TOO_LARGE = 1, 2, 3, 4, 5
VALUE_MAX_BYTES = 262144
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
            elif exc.errno == 11 and _forked_in(exc.__traceback__):
                flags |= HIT_PROCESSES
        elif isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
            flags |= HIT_PROCESSES
        exc = exc.__cause__ or exc.__context__
    return flags


def _forked_in(tb):
    import traceback
    return "fork" in "".join(traceback.format_tb(tb))


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
    threading = sys.modules.get("threading")  # not preloaded: its at-fork hook costs
    if threading is not None:
        try:
            threading._shutdown()
        except BaseException:
            pass
    atexit._run_exitfuncs()
    _flush()


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass


def _hide_own_frames(exc, seen=None):
    """Drops this file's frames (run, call_tool) from a traceback chain: the model should see
    its own code and the tool's message, not snapcell's plumbing."""
    seen = seen if seen is not None else set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == "<snapcell>":
            tb = tb.tb_next
        head = tb
        while tb is not None:
            while tb.tb_next is not None and tb.tb_next.tb_frame.f_code.co_filename == "<snapcell>":
                tb.tb_next = tb.tb_next.tb_next
            tb = tb.tb_next
        exc.__traceback__ = head
        exc = exc.__cause__ or exc.__context__


def _compile(source, filename, mode="exec"):
    """compile(source, filename, mode); guest/python.c replaces it with one that skips the
    check for an AST object, whose first call in a process creates the ast module's types
    (1.5-4 ms): in the first cell, forked before prepare() did that in the template."""
    return compile(source, filename, mode)


# The code's lines for linecache (tracebacks, warnings, inspect), while linecache is not
# imported: only in a cell forked before the template imported it (see _remember_lines).
_pending_lines = {}


class _LinesLoader:
    """Wraps linecache's real loader: once the module has run, the pending lines go into its
    cache, and the module's loader is the real one again."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        module.__loader__ = module.__spec__.loader = self.loader
        module.cache.update(_pending_lines)
        _pending_lines.clear()


class _LinecacheFinder:
    """On sys.meta_path until linecache is imported: finds it with the finders after it, puts
    _LinesLoader around the loader, and leaves."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "linecache":
            return None
        finders = sys.meta_path
        for finder in finders[finders.index(_LinecacheFinder) + 1:]:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None and spec.loader is not None:
                finders.remove(_LinecacheFinder)
                spec.loader = _LinesLoader(spec.loader)
                return spec
        return None


def _remember_lines(text):
    """Puts the code's lines where tracebacks find them: linecache's cache, or, in a cell whose
    template had not imported linecache yet, a pending entry that its import picks up (an
    import here would cost such a cell's every run ~10 ms)."""
    entry = (len(text), None, text.splitlines(True), FILENAME)
    linecache = sys.modules.get("linecache")
    if linecache is not None:
        linecache.cache[FILENAME] = entry
        return
    _pending_lines[FILENAME] = entry
    if _LinecacheFinder not in sys.meta_path:
        sys.meta_path.insert(0, _LinecacheFinder)


CO_COROUTINE = 0x80  # inspect.CO_COROUTINE
PyCF_ALLOW_TOP_LEVEL_AWAIT = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT


def _split_run(source):
    """((body, last), awaiting): _split_last's split, or, when the code is a SyntaxError that
    way, the same from the AST allowing `await`, `async for` and `async with` at the top level
    (the fast path first: the code's one compile when it has no top-level await). awaiting:
    the code runs on an event loop of its own (_run_awaiting)."""
    try:
        return _split_last(source), False
    except SyntaxError as first:
        try:
            return _split_awaiting(source), True
        except SyntaxError:
            raise first from None


def _split_awaiting(source):
    import _ast
    flags = PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(source, FILENAME, "exec", _ast.PyCF_ONLY_AST | flags, dont_inherit=True)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = compile(_ast.Expression(tree.body.pop().value), FILENAME, "eval", flags,
                       dont_inherit=True)
    return compile(tree, FILENAME, "exec", flags, dont_inherit=True), last


async def _run_awaiting(body, last, main):
    """A run with top-level await: its whole code inside one event loop (so its tool calls
    return awaitables); (value state, JSON) of the last expression, awaited when it awaits."""
    result = eval(body, main)
    if body.co_flags & CO_COROUTINE:
        await result
    if last is None:
        return VALUE_NO_EXPRESSION, None
    value = eval(last, main)
    if last.co_flags & CO_COROUTINE:
        value = await value
    return _value(value)


# Lines that cannot start a top-level statement: indented, or blank.
_NOT_A_START = (b" ", b"\t", b"\f", b"\r", b"\n", b"")
# How many lines at column 0, from the end, _split_last tries before the AST decides.
_SPLIT_TRIES = 8


def _padding(lines, at):
    """Blank lines in place of lines[:at], so the last statement keeps its line numbers; a
    comment among the first two (a coding cookie) is kept."""
    return b"".join(line if i < 2 and line.lstrip()[:1] == b"#" else b"\n"
                    for i, line in enumerate(lines[:at]))


def _split_last(source):
    """The code compiled for run(): (body, last), where last is its final statement compiled
    as an expression ("eval") when that statement is an expression, else None, and body is
    the rest ("exec"). A top-level statement starts at a line at column 0 whose lines before
    it compile alone; the first such line from the end is the last statement's start. When
    that takes more than a few tries (a last statement spanning lines at column 0) or the
    line holds a `;`, the AST decides: its module's types cost the cell that first builds
    them about 1 ms (the template builds them in prepare). Trials are quiet, and each part
    is compiled once where it counts, so a SyntaxWarning shows once."""
    lines = source.splitlines(True)
    tries = 0
    for at in range(len(lines) - 1, -1, -1):
        line = lines[at]
        if line[:1] in _NOT_A_START or line.lstrip()[:1] in (b"#", b""):
            continue
        tries += 1
        if tries > _SPLIT_TRIES or b";" in line:
            return _split_by_ast(source)
        before, rest = b"".join(lines[:at]), _padding(lines, at) + b"".join(lines[at:])
        try:
            _compile_quietly(rest, "eval")
            is_expression = True
        except SyntaxError:
            is_expression = False
        except BaseException:
            return _split_by_ast(source)
        try:
            if is_expression:
                body = _compile(before, FILENAME)
                return body, _compile(rest, FILENAME, "eval")
            _compile_quietly(before)
        except SyntaxError:
            continue  # not a statement's start: inside the last statement
        except BaseException:
            return _split_by_ast(source)
        # The last statement starts here and is no expression: compiled whole, so the
        # body's future imports apply to it.
        return _compile(source, FILENAME), None
    return _compile(source, FILENAME), None


def _compile_quietly(source, mode="exec"):
    """_compile with warnings ignored, for a trial whose code never runs: the compile that
    counts shows them (the warnings module's filters when it is imported, else _warnings',
    the same list unless the code replaced it)."""
    import _warnings
    module = sys.modules.get("warnings")
    filters = getattr(module, "filters", None) if module is not None else _warnings.filters
    entry = ("ignore", None, Warning, None, 0)
    if not isinstance(filters, list):
        return _compile(source, FILENAME, mode)
    filters.insert(0, entry)
    try:
        return _compile(source, FILENAME, mode)
    finally:
        if entry in filters:
            filters.remove(entry)


def _split_by_ast(source):
    """(body, last) from the AST; its parse is the code's one compile (errors and warnings
    are the code's own)."""
    import _ast
    tree = compile(source, FILENAME, "exec", _ast.PyCF_ONLY_AST)
    if not tree.body or not isinstance(tree.body[-1], _ast.Expr):
        return compile(tree, FILENAME, "exec"), None
    last = tree.body.pop()
    return (compile(tree, FILENAME, "exec"),
            compile(_ast.Expression(last.value), FILENAME, "eval"))


def _value(value):
    """(state, JSON bytes or None) for the last expression's value."""
    if value is None:
        return VALUE_NONE, None
    if _encode is None:
        _make_codec()
    try:
        text = _encode(value).encode("utf-8")
    except MemoryError:
        return VALUE_TOO_LARGE, None
    except Exception:  # a type json does not know, NaN, a cycle, a lone surrogate, depth
        return VALUE_NOT_JSON, None
    if len(text) > VALUE_MAX_BYTES:
        return VALUE_TOO_LARGE, None
    return VALUE_PRESENT, text


def run(source, session=False, run_tools=None):
    """Runs source as __main__, with the run's own tools (run_tools: the host's JSON list of
    [name, attribute path, description], or None) in `tools` for this run; returns (status,
    exit code, limit flags, value state, value's JSON or None). When the last statement is
    an expression its value is kept, as an interactive interpreter shows it, but never
    printed: the host gets its JSON. A session keeps the interpreter going afterwards: no
    thread shutdown, no atexit, just flushed output, and the run's tools gone again."""
    main = sys.modules["__main__"].__dict__
    text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
    _remember_lines(text)
    status, code, flags = OK, 0, 0
    value = (0, None)  # not evaluated
    if run_tools and _loads is None:
        _make_codec()
    added = _add_tools(_loads(run_tools)) if run_tools else ()
    try:
        (body, last), awaiting = _split_run(
            source if isinstance(source, bytes) else source.encode())
        if awaiting:
            import asyncio
            value = asyncio.run(_run_awaiting(body, last, main))
        else:
            exec(body, main)
            value = (VALUE_NO_EXPRESSION, None) if last is None else _value(eval(last, main))
    except SystemExit as e:
        code = _exit_code(e)
        status = OK if code == 0 else ERROR
        value = (0, None)
    except BaseException as e:
        value = (0, None)
        flags = _limit_flags(e)
        status, code = (MEMORY if flags & HIT_MEMORY else ERROR), 1
        _hide_own_frames(e)
        try:
            import traceback
            traceback.print_exception(e)
        except BaseException:
            print(f"{type(e).__name__}: (traceback unavailable)", file=sys.stderr)
    if session:
        _flush()
        _remove_tools(added)
    else:
        _finish()
    return status, code, flags, value[0], value[1]


_WARMUP = """
import json, re, collections
data = {"a": [1, 2.5, "x", None, True], "b": {"c": "d" * 20}}
text = json.dumps(data, indent=1)
assert json.loads(text) == data
print(sum(len(m.group(0)) for m in re.finditer(r"\\w+", text)), collections.Counter(text)["a"])
"""


def _quietly(source):
    saved = sys.stdout
    sys.stdout = io.StringIO()
    try:
        exec(_compile(source, "<warmup>"), {"__name__": "__warmup__"})
    finally:
        sys.stdout = saved


_warming = False  # the template is running the config's warm-up (warm_up)


class _Discard(io.TextIOBase):
    """Where the template's setup prints (the preloads, the warm-up): nowhere. A StringIO would
    keep the text, and a stream kept from then (logging.basicConfig's handler) would hand it,
    the caller's output, to every cell's code."""

    def writable(self):
        return True

    def write(self, text):
        return len(text)


def warm_up(source):
    """In the template, once, after the preloads: the config's warm-up code, in a namespace of
    its own that is dropped afterwards (what it imports stays imported), its output discarded.
    Returns None, or one line for the setup error: the exception and its innermost frames."""
    global _warming
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = _Discard()
    _warming = True
    try:
        exec(compile(source, "<warmup>", "exec"), {"__name__": "__warmup__"})
    except BaseException as e:
        return _warmup_error(e, source)
    finally:
        _warming = False
        sys.stdout, sys.stderr = saved
        gc.collect()  # files it left unreferenced are closed before the descriptors are checked
    return None


def _warmup_error(exc, source):
    """The exception, then where: the warm-up's own line that was running, and the innermost
    frame when that lies in a library. Short: it has to fit the setup error."""
    import traceback
    lines = source.splitlines()
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != "<snapcell>"]
    own = [f for f in frames if f.filename == "<warmup>"]
    where = []
    if own:
        line = own[-1].lineno or 0
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        where.append(f"<warmup>:{line}" + (f" `{text[:40]}`" if text else ""))
    if frames and frames[-1].filename != "<warmup>":
        where.append(f"in {frames[-1].filename.rpartition('/')[2]}:{frames[-1].lineno}")
    return f"{type(exc).__name__}: {exc}" + (f" (at {', '.join(where)})" if where else "")


def add_site_dirs(dirs):
    """In the template: a venv's site-packages, already on sys.path, has its .pth files
    processed as site.addsitedir does (paths added, import lines run); then `sitecustomize`
    is imported where sys.path has one, as site.main would (the interpreter runs without
    site), once, for every cell."""
    if dirs:
        import site
        for d in dirs:
            site.addsitedir(d)
    try:
        import sitecustomize  # noqa: F401
    except ImportError as exc:
        if exc.name != "sitecustomize":
            raise


def preload_error(exc):
    """One line for a preloaded module that failed to import, to fit the setup error: the
    exception, then the innermost frames of its traceback (file:line), newest first."""
    import traceback
    frames = [f"{f.filename.rpartition('/')[2]}:{f.lineno}"
              for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    where = f" (at {' < '.join(reversed(frames[-4:]))})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def prepare():
    """In the template, once: the first-time work of a typical run (compiling, the regex and
    JSON encoder caches, formatting a traceback), so that no cell redoes it; then the heap is
    frozen out of the collector's reach, so cells share it copy-on-write."""
    import traceback
    _quietly(_WARMUP)
    try:
        raise ValueError("warm")
    except ValueError as e:
        traceback.format_exception(e)
    _make_codec()
    # The last expression's path: the split (its AST way too, whose types are then built
    # here, once) and the value's encoding.
    _split_last(b"x = [1]\nx\n")
    _split_last(b"x = [1]\nx;x\n")
    _value({"a": [1, 2.5, "x", None, True]})
    gc.collect()
    gc.freeze()


def warm():
    """In each parked cell: a one-line run, so the cell pays the copy-on-write faults of the
    run path before a request instead of during one; with tools, and once prepare made the
    JSON codec, the same for a tool call's path (every step but the exchange with the host).
    Output goes nowhere."""
    _quietly("print(1)")
    if _tools_configured and _encode is not None:
        _warm_tool_path()


def reseed():
    """In a cell reset in place (guest/cell.c), before each run: the random states a fork
    renews (at-fork hooks, a new pid) and a reset does not, renewed from the kernel. The hash
    secret stays the template's, as in forked cells. Every page this writes is one more the
    reset copies back: the global generator is seeded by _random's own seed, from the kernel,
    as random.seed() does but without its checks of the argument's type, whose counts of six
    type objects are writes to as many pages of the interpreter's data."""
    random = sys.modules.get("random")
    if random is not None:  # the module's global generator, behind random.random()
        inst, base = getattr(random, "_inst", None), sys.modules.get("_random")
        if base is not None and isinstance(inst, base.Random):
            base.Random.seed(inst)
            if inst.gauss_next is not None:
                inst.gauss_next = None  # what random.seed() sets after
        else:
            random.seed()
    tempfile = sys.modules.get("tempfile")
    if tempfile is not None:
        tempfile._name_sequence = None  # its own generator, renewed only on a pid change
    ssl = sys.modules.get("_ssl")
    if ssl is not None:
        import os
        ssl.RAND_add(os.urandom(64), 64.0)  # OpenSSL's generator reseeds on a fork only
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        nprandom.seed()  # the legacy global RandomState behind numpy.random.rand()


class ToolError(Exception):
    """A host tool failed, is unknown, or rejected its arguments; the message says which."""


ToolError.__module__ = "builtins"


# One encoder and decoder for every call (json.dumps with options builds an encoder per call),
# made by prepare in the template, or by a cell's first call when it was parked before that.
_encode = _decode = _loads = None
_exchange = None  # _snapcell.call, set by configure
_tools_configured = False


def _make_codec():
    global _encode, _decode, _loads
    import json
    _encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
    _decode = json.JSONDecoder().decode
    _loads = json.loads


def _tool_json(name, kwargs):
    if _encode is None:
        _make_codec()
    try:
        return _encode(kwargs).encode("utf-8")
    except RecursionError:
        raise ToolError(f"arguments for tool {name!r} are nested too deeply") from None
    except (TypeError, ValueError) as e:
        raise ToolError(f"arguments for tool {name!r} are not JSON: {e}") from None
    except UnicodeEncodeError as e:
        raise ToolError(f"arguments for tool {name!r} are not valid Unicode: {e}") from None


def _running_loop():
    """The event loop running in this thread, if any (asyncio is not imported before the code
    imports it, and then no loop can run)."""
    asyncio = sys.modules.get("asyncio")
    return asyncio.events._get_running_loop() if asyncio is not None else None


def call_tool(name, /, *args, **kwargs):
    """Calls the host tool `name` with keyword arguments and returns its result as Python
    values. Raises ToolError when the tool fails, is unknown or rejects the arguments. Inside a
    running event loop (asyncio.run(main()), or a run with top-level await) it returns an
    awaitable of the same instead: the call is sent at once, so calls gathered or awaited later
    run at the same time on the host."""
    if not isinstance(name, str):
        raise TypeError(f"call_tool() needs the tool name as a string, not {type(name).__name__}")
    if args:
        raise TypeError(f"call_tool() takes keyword arguments only: "
                        f"call_tool({name!r}, a=1, b=2), not {len(args)} positional")
    # What the code printed so far reaches the host before the call: a call that waits for a
    # decision returns a result with all of it.
    _flush()
    loop = _running_loop()
    if loop is not None:
        return _awaited(_start_call(loop, name, kwargs))
    try:
        ok, answer = _exchange(name, _tool_json(name, kwargs))
    except ValueError as e:  # the bridge's checks: name, size
        raise _refused(name, e) from None
    return _result(name, ok, answer)


def _refused(name, e):
    shown = name if len(name) <= 64 else name[:64] + "..."
    return ToolError(f"tool {shown!r}: {e}")


def _result(name, ok, answer):
    """The Python value of a call's answer, or its ToolError raised."""
    if not ok:
        raise ToolError(answer.decode("utf-8", "replace"))
    try:
        # What json.loads does with bytes, minus its encoding detection when the first two
        # bytes show UTF-8 (a UTF-16 or UTF-32 text or BOM starts with a NUL or a high byte).
        head = answer[:2]
        if head and head[0] < 0x80 and 0 not in head:
            return _decode(answer.decode("utf-8", "surrogatepass"))
        return _loads(answer)
    except ValueError as e:
        raise ToolError(f"tool {name!r} returned invalid JSON: {e}") from None


# Awaited calls: id -> (loop, name, future), for every loop in the process (a loop's collect can
# read answers of another thread's loop, and hands them over). The bridge lists a call here
# before it sends it, so no answer comes for a call not listed.
_awaited_calls = {}
_watching = {}  # loop -> the descriptors it watches for answers


def _start_call(loop, name, kwargs):
    """Sends an awaited call; the future its answer settles."""
    import _snapcell
    future = loop.create_future()
    try:
        if loop not in _watching:
            fds = _watching[loop] = _snapcell.fds()
            for fd in fds:
                loop.add_reader(fd, _collect)
        _snapcell.start(name, _tool_json(name, kwargs), _awaited_calls, (loop, name, future))
    except ValueError as e:  # the bridge's checks: name, size, calls in flight
        future.set_exception(_refused(name, e))
    except BaseException as e:
        future.set_exception(e)
    return future


async def _awaited(future):
    return await future


def _collect():
    """A loop's reader: settles the awaited calls answered so far; a loop no call waits for
    stops watching."""
    import _snapcell
    for call_id, ok, answer in _snapcell.collect():
        if call_id in _awaited_calls:  # else a call whose loop ended, forgotten
            _settle(call_id, ok, answer)
    for call_id in [i for i, entry in _awaited_calls.items() if entry[0].is_closed()]:
        del _awaited_calls[call_id]  # a loop that ended (a session's earlier run) waits no more
    for ended in [loop for loop in _watching if loop.is_closed()]:
        del _watching[ended]
    loop = _running_loop()
    if loop in _watching and all(entry[0] is not loop for entry in _awaited_calls.values()):
        for fd in _watching.pop(loop):
            loop.remove_reader(fd)


def _settle(call_id, ok, answer):
    loop, name, future = _awaited_calls.pop(call_id)
    if ok is None:
        import os
        outcome = (False, OSError(answer, os.strerror(answer)))
    else:
        try:
            outcome = (True, _result(name, ok, answer))
        except ToolError as e:
            outcome = (False, e)
    try:
        if _running_loop() is loop:
            _resolve(future, outcome)
        else:
            loop.call_soon_threadsafe(_resolve, future, outcome)
    except RuntimeError:  # that loop is closed: nothing awaits the call any more
        pass


def _resolve(future, outcome):
    if not future.done():
        if outcome[0]:
            future.set_result(outcome[1])
        else:
            future.set_exception(outcome[1])


def _warm_tool_path():
    """A tool call with a stand-in for the exchange: the encoder, the decoder and call_tool's
    own objects get this cell's copies now, not during the run's first call."""
    global _exchange
    real = _exchange
    _exchange = lambda name, body: (True, b'{"a": [1, 2.5, "x", null, true], "b": {}}')
    try:
        call_tool("warm", a=[1, 2.5, "x", None, True], b={"c": "d"})
    finally:
        _exchange = real


def _guard_network(notice):
    """Until the egress gate exists, seccomp refuses socket() (EACCES) and nothing resolves.
    This turns those failures into one error that says so, raised where the code tried:
    socket creation (socket.socket, _socket.socket, create_connection, urlopen) and the
    resolver functions. Only `_socket` (built in, cheap) is touched here, in the template;
    socket.py, imported later by a cell, builds on the wrapped names. The seccomp policy is
    unchanged: this only rewords what it refuses."""
    import _socket
    real_socket, gaierror = _socket.socket, _socket.gaierror

    class NetworkUnavailableError(gaierror, PermissionError):
        """The sandbox has no network access (yet); a PermissionError and a gaierror, so
        code that handles either still does."""

    NetworkUnavailableError.__module__ = "socket"
    NetworkUnavailableError.__qualname__ = "NetworkUnavailableError"

    def refused(what):
        return NetworkUnavailableError(13, f"{what}: {notice}")

    class socket(real_socket):
        __slots__ = ()

        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if _warming and fileno is None and family != _socket.AF_UNIX:
                raise PermissionError(13, "no network in the warm-up (it runs in the "
                                      "template, before any run)")
            try:
                real_socket.__init__(self, family, type, proto, fileno)
            except PermissionError:
                if fileno is not None or family == _socket.AF_UNIX:
                    raise
                raise refused("cannot open a network socket") from None

    socket.__module__ = "_socket"
    socket.__qualname__ = "socket"
    socket.__doc__ = real_socket.__doc__

    def resolver(real, noun):
        def wrapped(*args, **kwargs):
            if _warming:
                raise PermissionError(13, "no network in the warm-up (it runs in the "
                                      "template, before any run)")
            try:
                return real(*args, **kwargs)
            except (gaierror, _socket.herror):
                host = args[0] if args else next(iter(kwargs.values()), None)
                raise refused(f"cannot {noun} {host!r}") from None
        wrapped.__name__ = wrapped.__qualname__ = real.__name__
        wrapped.__doc__ = real.__doc__
        return wrapped

    for fn, noun in (("getaddrinfo", "resolve"), ("gethostbyname", "resolve"),
                     ("gethostbyname_ex", "resolve"), ("gethostbyaddr", "look up"),
                     ("getnameinfo", "look up")):
        setattr(_socket, fn, resolver(getattr(_socket, fn), noun))
    _socket.socket = _socket.SocketType = socket
    _socket.NetworkUnavailableError = NetworkUnavailableError


def _gate_network():
    """A sandbox with network entries: the cell's network namespace has only loopback, and
    every TCP connection it makes lands at the host's egress gate, which decides on its own
    (code that bypasses this module gains nothing). This only makes the gate's decisions
    readable where the code asked: the resolver asks the host for a name (allowed names get
    an address that leads to the gate; others a socket.gaierror naming the rule), and
    connect() asks before connecting, so a refusal is a PermissionError with the rule
    instead of a reset stream."""
    import _socket
    import _snapcell
    real_socket, gaierror = _socket.socket, _socket.gaierror
    real_getaddrinfo = _socket.getaddrinfo

    class NetworkDeniedError(gaierror, PermissionError):
        """The sandbox's allow-list refused a name or a connection; a PermissionError and a
        gaierror, so code that handles either still does."""

    NetworkDeniedError.__module__ = "socket"
    NetworkDeniedError.__qualname__ = "NetworkDeniedError"

    def numeric(host):
        for family in (_socket.AF_INET, _socket.AF_INET6):
            try:
                _socket.inet_pton(family, host)
                return True
            except (OSError, ValueError):
                pass
        return False

    def lookup(host):
        """The address the gate answers for host (a str), or NetworkDeniedError."""
        if len(host) > 253 or not host.isascii() or " " in host:
            raise NetworkDeniedError(_socket.EAI_NONAME, f"cannot resolve {host[:64]!r}: "
                                     "not a host name")
        ok, answer = _snapcell.net(b"R " + host.encode())
        if not ok:
            raise NetworkDeniedError(_socket.EAI_NONAME, answer)
        return answer

    def text(host):
        if isinstance(host, (bytes, bytearray)):
            host = bytes(host).decode("idna")
        elif isinstance(host, str) and not host.isascii():
            host = host.encode("idna").decode("ascii")
        return host

    def getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):
        host = text(host)
        if isinstance(host, str) and host and not numeric(host) and host != "localhost":
            host = lookup(host.lower().rstrip("."))
            flags |= _socket.AI_NUMERICHOST
        return real_getaddrinfo(host, port, family, type, proto, flags)

    def gethostbyname(host):
        host = text(host)
        return host if numeric(host) else lookup(host.lower().rstrip("."))

    def gethostbyname_ex(host):
        return (text(host), [], [gethostbyname(host)])

    def check(sock, address):
        if sock.family not in (_socket.AF_INET, _socket.AF_INET6):
            return
        if not isinstance(address, tuple) or len(address) < 2:
            return  # the real call raises its own TypeError
        host, port = address[0], address[1]
        if not numeric(text(host)):
            host = gethostbyname(host)
        ok, answer = _snapcell.net(f"C {host} {int(port)}".encode())
        if not ok:
            raise NetworkDeniedError(13, answer)

    class socket(real_socket):
        __slots__ = ()

        def connect(self, address):
            check(self, address)
            return real_socket.connect(self, address)

        def connect_ex(self, address):
            check(self, address)
            return real_socket.connect_ex(self, address)

    socket.__module__ = "_socket"
    socket.__qualname__ = "socket"
    socket.__doc__ = real_socket.__doc__
    for name, fn in (("getaddrinfo", getaddrinfo), ("gethostbyname", gethostbyname),
                     ("gethostbyname_ex", gethostbyname_ex)):
        real = getattr(_socket, name)
        fn.__name__ = fn.__qualname__ = real.__name__
        fn.__doc__ = real.__doc__
        setattr(_socket, name, fn)
    _socket.socket = _socket.SocketType = socket
    _socket.NetworkDeniedError = NetworkDeniedError


_tools_module = _bind = None  # the `tools` module and its function maker, set by configure


def _add_tools(tools):
    """Puts (name, attribute path, description) tools into the `tools` module; returns what it
    added, (object, attribute) pairs, innermost last, for _remove_tools. The host has refused
    paths that clash with the module's own tools."""
    import types
    added = []
    for tool_name, attr, doc in tools:
        *spaces, leaf = attr.split(".")
        where = _tools_module
        for space in spaces:
            if not hasattr(where, space):
                setattr(where, space, types.SimpleNamespace())
                added.append((where, space))
            where = getattr(where, space)
        setattr(where, leaf, _bind(tool_name, doc))
        added.append((where, leaf))
    return added


def _remove_tools(added):
    """Takes a session run's own tools out of `tools` again (what the code did to the module
    meanwhile is its own)."""
    for where, name in reversed(added):
        try:
            delattr(where, name)
        except AttributeError:
            pass


def configure(tools, network_notice, network):
    """Installs call_tool, ToolError and a `tools` module as builtins; the module's attributes
    call the registered tools: tools.compute(a=1, b=2), and tools.docs.search_v2(q="x") for
    "docs.search-v2" (the host gives each tool's attribute path and has refused clashes);
    and the network's guard (no entries) or its gate's wording (entries)."""
    if network:
        _gate_network()
    else:
        _guard_network(network_notice)
    import builtins
    import types
    import _snapcell
    global _exchange, _tools_configured
    _exchange = _snapcell.call
    _tools_configured = bool(tools)
    builtins.call_tool = call_tool
    builtins.ToolError = ToolError
    module = types.ModuleType("tools", "The host's tools, callable with keyword arguments.")

    def bind(tool_name, doc):
        def tool(**kwargs):
            return call_tool(tool_name, **kwargs)
        tool.__name__ = tool.__qualname__ = tool_name
        tool.__doc__ = doc
        return tool

    global _tools_module, _bind
    _tools_module, _bind = module, bind
    _add_tools(tools)
    module.ToolError = ToolError
    module.call_tool = call_tool
    sys.modules["tools"] = module
    # The description says tools.name(...) is the same call as call_tool: so `tools` needs no
    # import, as call_tool does not (`import tools` finds the same module).
    builtins.tools = module
