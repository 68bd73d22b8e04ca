# A probe of a cell's process state for the differential test (tests/c/integration/
# test_state_diff.c), which checks that a cell reset in place equals a fresh fork: everything
# of a cell's process that a run could change and a later run could see, as one canonical
# JSON description. Not a checker: it says what it sees
# and the test compares. Standard library and ctypes only.
#
# Two views, one file. Run as a run's code in a cell (where `call_tool` is a builtin), it
# describes the process from inside (system calls: a cell has no /proc) and then calls the
# host tool `state_view` with its pid and the inode of its stdout pipe; the test's tool runs
# this file again on the host, `python3 probe.py --outside NSPID PIPE_INODE`, which finds that
# process and describes it from its /proc (maps, threads, fdinfo, timers, locks, children,
# seccomp filters, status), while the cell waits for the answer. The inside view prints
# {"inside": ...}; the test adds the host's as "outside". A cell's non-dumpable /proc takes
# root (CAP_SYS_PTRACE) to read: otherwise the outside view is {"unavailable": reason}.
#
# It must not fire the cell's seccomp tripwires (keyctl, add_key, request_key, bpf, ... kill
# the cell), so keyrings are not probed from inside. A call the filter refuses is reported as
# {"refused": "EPERM"}: a stable value, so a change of policy shows too. "per_run" holds what
# must differ between runs (the random generators, re-seeded per run); the rest must be equal
# in two cells forked from one template, and in a reset cell.
#
# Normalised, because it differs between two forks, and only this:
# - kernel object numbers: inodes of pipes, sockets, anonymous inodes and of files on the
#   cell's own tmpfs mounts, mount ids, namespace ids and the cell's cgroup (the host makes
#   each cell's pipes, socket, mounts, namespaces and memory cgroup anew). They become "kind#N" in order of first appearance, so
#   which descriptors share an object stays visible.
# - pids and tids: a fresh cell is pid 1 of its own pid namespace, but a session's worker,
#   its threads and children get what the namespace hands out: "tid#N", "child#N".
# - what counts time or work: timer remainders (kept: interval and whether armed), CPU and
#   memory use, context switches, and the signals queued for the whole uid (SigQ, which other
#   cells of the sandbox, dying, may still hold).
# Mappings keep their addresses: a fork has its parent's layout and a run of the same code
# allocates the same way, so a mapping a run added or a heap end it moved shows as it is.


def _snapcell_inside():
    import sys

    modules_at_start = sorted(sys.modules)
    main_globals = sorted(sys.modules["__main__"].__dict__)

    import builtins
    import ctypes
    import errno
    import fcntl
    import hashlib
    import os
    import resource
    import signal
    import stat
    import threading
    import types

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    renames = {}

    def renumber(kind, value):
        table = renames.setdefault(kind, {})
        if value not in table:
            table[value] = "%s#%d" % (kind, len(table))
        return table[value]

    def refused(code):
        return {"refused": errno.errorcode.get(code, str(code))}

    def call(fn, *args):
        try:
            return fn(*args)
        except OSError as e:
            return refused(e.errno)

    def sha(value):
        return hashlib.sha256(repr(value).encode()).hexdigest()[:16]

    def syscall(nr, *args):
        ctypes.set_errno(0)
        rc = libc.syscall(nr, *args)
        return refused(ctypes.get_errno()) if rc == -1 else rc

    # x86_64 and aarch64 numbers of the calls Python has no wrapper for.
    nrs = {
        "x86_64": {"rt_sigaction": 13, "rt_sigprocmask": 14, "rt_sigpending": 127,
                   "sigaltstack": 131, "personality": 135, "capget": 125,
                   "landlock_create_ruleset": 444, "shmget": 29, "msgget": 68,
                   "semget": 64, "mq_open": 240, "prctl": 157, "get_robust_list": 274,
                   "arch_prctl": 158},
        "aarch64": {"rt_sigaction": 134, "rt_sigprocmask": 135, "rt_sigpending": 136,
                    "sigaltstack": 132, "personality": 92, "capget": 90,
                    "landlock_create_ruleset": 444, "shmget": 194, "msgget": 186,
                    "semget": 190, "mq_open": 180, "prctl": 167, "get_robust_list": 100},
    }[os.uname().machine]
    state = {}

    def sockopts(fd):
        import socket
        out = {}
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError as e:
            return refused(e.errno)
        with sock:
            for name in ("SO_TYPE", "SO_RCVBUF", "SO_SNDBUF", "SO_RCVLOWAT", "SO_SNDLOWAT",
                         "SO_PRIORITY", "SO_PASSCRED", "SO_KEEPALIVE", "SO_LINGER",
                         "SO_MARK", "SO_BROADCAST", "SO_OOBINLINE"):
                opt = getattr(socket, name, None)
                if opt is not None:
                    out[name] = call(sock.getsockopt, socket.SOL_SOCKET, opt,
                                     8 if name == "SO_LINGER" else 0)
                    if isinstance(out[name], bytes):
                        out[name] = out[name].hex()
            for name in ("SO_RCVTIMEO", "SO_SNDTIMEO"):
                value = call(sock.getsockopt, socket.SOL_SOCKET, getattr(socket, name), 16)
                out[name] = value.hex() if isinstance(value, bytes) else value
        return out

    # Descriptors: every number below the soft limit, its type, flags, offset, file.
    fds = {}
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    for fd in range(min(soft, 1 << 16)):
        try:
            fd_flags = fcntl.fcntl(fd, fcntl.F_GETFD)
        except OSError:
            continue
        st = os.fstat(fd)
        kind = stat.S_IFMT(st.st_mode)
        own = stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode) or st.st_nlink == 0 \
            or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISCHR(st.st_mode))
        fds[str(fd)] = {
            "fd_flags": fd_flags,
            "fl_flags": fcntl.fcntl(fd, fcntl.F_GETFL),
            "type": oct(kind),
            "mode": oct(st.st_mode),
            "object": renumber("obj", (st.st_dev, st.st_ino)) if own else
            [st.st_dev, st.st_ino, st.st_size],
            "offset": call(os.lseek, fd, 0, os.SEEK_CUR),
            "pipe_size": call(fcntl.fcntl, fd, 1032) if stat.S_ISFIFO(st.st_mode) else None,
        }
        if stat.S_ISSOCK(st.st_mode):
            fds[str(fd)]["sockopts"] = sockopts(fd)
    state["fds"] = fds

    # Signals: every signal's kernel action, Python's handlers, mask, pending, alternate stack.
    class KSigaction(ctypes.Structure):
        _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                    ("restorer", ctypes.c_void_p), ("mask", ctypes.c_uint64)]

    actions = {}
    for sig in range(1, 65):
        old = KSigaction()
        rc = syscall(nrs["rt_sigaction"], sig, None, ctypes.byref(old), 8)
        actions[str(sig)] = rc if isinstance(rc, dict) else [
            hex(old.handler or 0), hex(old.flags), hex(old.restorer or 0), hex(old.mask)]
    state["sigaction"] = actions

    def handler_name(h):  # str() of an IntEnum differs between 3.10 and 3.11
        if h is None:
            return "None"
        if h in (signal.SIG_DFL, signal.SIG_IGN):
            return signal.Handlers(h).name
        return "%s.%s" % (getattr(h, "__module__", "?"), getattr(h, "__qualname__", type(h)))

    state["python_signal_handlers"] = {
        str(int(s)): handler_name(signal.getsignal(s)) for s in sorted(signal.valid_signals())
        if s < signal.SIGRTMIN}
    wakeup = signal.set_wakeup_fd(-1)
    if wakeup != -1:
        signal.set_wakeup_fd(wakeup)
    state["python_wakeup_fd"] = wakeup
    mask = ctypes.c_uint64()
    syscall(nrs["rt_sigprocmask"], 0, None, ctypes.byref(mask), 8)
    state["sigmask"] = hex(mask.value)
    pending = ctypes.c_uint64()
    syscall(nrs["rt_sigpending"], ctypes.byref(pending), 8)
    state["sigpending"] = hex(pending.value)

    class StackT(ctypes.Structure):
        _fields_ = [("sp", ctypes.c_void_p), ("flags", ctypes.c_int), ("size", ctypes.c_size_t)]

    alt = StackT()
    rc = syscall(nrs["sigaltstack"], None, ctypes.byref(alt))
    state["sigaltstack"] = rc if isinstance(rc, dict) else [hex(alt.sp or 0), alt.flags, alt.size]

    itimers = {}
    for name in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"):
        value, interval = signal.getitimer(getattr(signal, name))
        itimers[name] = {"armed": value > 0, "interval": interval}
    state["itimers"] = itimers

    # Identity and privileges.
    state["creds"] = {"resuid": os.getresuid(), "resgid": os.getresgid(),
                      "groups": sorted(os.getgroups())}

    class CapHeader(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    caps = (ctypes.c_uint32 * 6)()
    rc = syscall(nrs["capget"], ctypes.byref(CapHeader(0x20080522, 0)), caps)
    state["capabilities"] = rc if isinstance(rc, dict) else [hex(c) for c in caps]

    def prctl(option, arg=0, by_pointer=False):
        out = ctypes.c_ulong()
        rc = syscall(nrs["prctl"], option, ctypes.byref(out) if by_pointer else arg, 0, 0, 0)
        return rc if isinstance(rc, dict) or not by_pointer else out.value

    name = ctypes.create_string_buffer(32)
    syscall(nrs["prctl"], 16, name, 0, 0, 0)  # PR_GET_NAME
    state["prctl"] = {
        "name": name.value.decode("utf-8", "replace"),
        "pdeathsig": prctl(2, by_pointer=True), "dumpable": prctl(3), "keepcaps": prctl(7),
        "seccomp": prctl(21), "tsc": prctl(25, by_pointer=True), "securebits": prctl(27),
        "timerslack": prctl(30), "mce_kill": prctl(34),
        "child_subreaper": prctl(37, by_pointer=True), "no_new_privs": prctl(39),
        "thp_disable": prctl(42), "fp_mode": prctl(46), "speculation": prctl(52, 0),
        "tagged_addr": prctl(56), "io_flusher": prctl(58), "mdwe": prctl(66),
    }
    state["capbset"] = [prctl(23, c) for c in range(64)]  # PR_CAPBSET_READ
    # As a 64-bit argument: the filter compares all of it, and a C int would be sign-extended.
    state["personality"] = syscall(nrs["personality"], ctypes.c_ulong(0xFFFFFFFF))
    head, head_len = ctypes.c_void_p(), ctypes.c_size_t()
    rc = syscall(nrs["get_robust_list"], 0, ctypes.byref(head), ctypes.byref(head_len))
    state["robust_list"] = rc if isinstance(rc, dict) else [hex(head.value or 0), head_len.value]
    if "arch_prctl" in nrs:  # the thread pointer (ARCH_GET_FS)
        fs = ctypes.c_ulong()
        rc = syscall(nrs["arch_prctl"], 0x1003, ctypes.byref(fs))
        state["fs_base"] = rc if isinstance(rc, dict) else hex(fs.value)
    # Landlock: the call is refused (ENOSYS); what the domain allows shows in what opens.
    state["landlock_abi"] = syscall(nrs["landlock_create_ruleset"], None, 0, 1)
    access = {}
    for path, flags in (("/", os.O_RDONLY | os.O_DIRECTORY), ("/etc/passwd", os.O_RDONLY),
                        ("/etc/hostname", os.O_RDONLY), ("/usr", os.O_RDONLY),
                        ("/tmp", os.O_WRONLY | os.O_TMPFILE),
                        ("/output", os.O_WRONLY | os.O_TMPFILE),
                        ("/dev/null", os.O_WRONLY), (sys.executable, os.O_RDONLY)):
        try:
            os.close(os.open(path, flags | os.O_CLOEXEC))
            access["%s %o" % (path, flags)] = "ok"
        except OSError as e:
            access["%s %o" % (path, flags)] = refused(e.errno)
    state["path_access"] = access

    state["rlimits"] = {n: resource.getrlimit(getattr(resource, n))
                        for n in sorted(dir(resource)) if n.startswith("RLIMIT_")}
    state["cwd"] = call(os.getcwd)
    old_umask = os.umask(0o22)
    os.umask(old_umask)
    state["umask"] = oct(old_umask)
    state["sched"] = {"policy": call(os.sched_getscheduler, 0),
                      "param": getattr(call(os.sched_getparam, 0), "sched_priority", None),
                      "nice": call(os.getpriority, os.PRIO_PROCESS, 0),
                      "affinity": sorted(call(os.sched_getaffinity, 0))}
    state["process"] = {"pid": os.getpid(), "ppid": os.getppid(),
                        "pgrp_is_pid": os.getpgrp() == os.getpid(),
                        "sid_is_pid": os.getsid(0) == os.getpid()}
    state["uname"] = list(os.uname())
    # Keyrings: keyctl, add_key and request_key are tripwires (the cell dies), so a run
    # cannot make or join one and the probe does not ask. IPC: the calls' answers.
    state["keyrings"] = "not probed: keyctl, add_key and request_key kill the cell"
    state["sysv_ipc"] = {n: syscall(nrs[n], 0, 0, 0) for n in ("shmget", "msgget", "semget")}
    state["mq_open"] = syscall(nrs["mq_open"], b"/snapcell-probe", 0, 0, None)
    state["dev_shm"] = sorted(call(os.listdir, "/dev/shm") or ()) \
        if os.path.isdir("/dev/shm") else None
    # Children the process could wait for (WNOWAIT: none is reaped).
    try:
        state["waitable_child"] = os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED |
                                            os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        state["waitable_child"] = "none"
    state["environ"] = sorted(os.environ.items())

    def tree(top):
        out = []
        for root, dirs, files in os.walk(top):
            dirs.sort()
            for n in sorted(dirs + files):
                p = os.path.join(root, n)
                st = os.lstat(p)
                out.append([p, oct(st.st_mode), st.st_size if stat.S_ISREG(st.st_mode) else 0])
        return out

    state["tmp"] = tree("/tmp")
    state["output"] = tree("/output")

    # Python-level state: modules and their attributes, builtins, import machinery, hooks.
    def code_key(code):  # a nested code object's repr holds its address
        return (code.co_filename, code.co_firstlineno, code.co_code,
                [code_key(c) if isinstance(c, types.CodeType) else repr(c)
                 for c in code.co_consts])

    def describe(value, depth=0):
        code = getattr(value, "__code__", None)
        if isinstance(value, types.BuiltinFunctionType):
            return ["builtin", value.__qualname__, type(value.__self__).__name__]
        if isinstance(code, types.CodeType):
            return ["function", getattr(value, "__qualname__", "?"), sha(code_key(code))]
        if isinstance(value, type(sys)):
            return ["module", value.__name__]
        if isinstance(value, type):
            if depth == 0 and value.__module__ != "builtins":
                return ["class", value.__qualname__,
                        sha(sorted((k, describe(v, 1)) for k, v in list(vars(value).items())))]
            return ["class", value.__qualname__]
        if isinstance(value, (int, float, str, bytes, bool, type(None))):
            return ["value", sha(value)]
        if isinstance(value, (tuple, frozenset)) and len(value) < 64:
            return ["value", type(value).__name__, sha(sorted(repr(v) for v in value))]
        if isinstance(value, (list, dict, set)) and len(value) < 4096:
            return [type(value).__name__, len(value)]
        return [type(value).__name__]

    skip_attrs = {"__loader__", "__spec__", "__cached__", "__builtins__"}
    module_attrs = {}
    for mod_name in modules_at_start:
        mod = sys.modules.get(mod_name)
        try:
            items = sorted(vars(mod).items())
        except TypeError:
            module_attrs[mod_name] = [type(mod).__name__]
            continue
        attrs = [(k, describe(v)) for k, v in items
                 if k not in skip_attrs and not k.startswith("_snapcell_")]
        module_attrs[mod_name] = attrs if mod_name == "__main__" else sha(attrs)
    state["sys_modules"] = modules_at_start
    state["module_attrs"] = module_attrs
    state["builtins"] = {k: describe(v) for k, v in sorted(vars(builtins).items()) if k != "_"}
    state["main_globals"] = [n for n in main_globals if not n.startswith("_snapcell_")]
    state["sys"] = {
        "path": list(sys.path),
        "meta_path": [describe(f) for f in sys.meta_path],
        "path_hooks": [describe(h) for h in sys.path_hooks],
        "path_importer_cache": sorted(sys.path_importer_cache),
        "flags": repr(sys.flags),
        "recursionlimit": sys.getrecursionlimit(),
        "switchinterval": sys.getswitchinterval(),
        "trace": describe(sys.gettrace()),
        "profile": describe(sys.getprofile()),
        "excepthook": describe(sys.excepthook),
        "displayhook": describe(sys.displayhook),
        "breakpointhook": describe(sys.breakpointhook),
        "unraisablehook": describe(sys.unraisablehook),
        "int_max_str_digits": getattr(sys, "get_int_max_str_digits", lambda: None)(),
        "dont_write_bytecode": sys.dont_write_bytecode,
        "asyncgen_hooks": [describe(h) for h in sys.get_asyncgen_hooks()],
        "coroutine_origin_tracking_depth": sys.get_coroutine_origin_tracking_depth(),
        "monitoring_tools": [sys.monitoring.get_tool(i) for i in range(6)]
        if hasattr(sys, "monitoring") else None,
        "threading_trace": describe(getattr(threading, "_trace_hook", None)),
        "threading_profile": describe(getattr(threading, "_profile_hook", None)),
        "stdout": [type(sys.stdout).__name__, getattr(sys.stdout, "encoding", None),
                   getattr(sys.stdout, "line_buffering", None)],
        "stderr": [type(sys.stderr).__name__, getattr(sys.stderr, "encoding", None)],
        "stdin": [type(sys.stdin).__name__],
    }
    import atexit
    import gc
    import locale
    import warnings
    state["python_hooks"] = {
        "atexit_callbacks": atexit._ncallbacks(),
        "gc_enabled": gc.isenabled(),
        "gc_threshold": gc.get_threshold(),
        "gc_callbacks": [describe(c) for c in gc.callbacks],
        "gc_freeze_count": gc.get_freeze_count(),
        "warnings_filters": sha(warnings.filters),
        "locale": locale.setlocale(locale.LC_ALL, None),
        "faulthandler": sys.modules["faulthandler"].is_enabled()
        if "faulthandler" in sys.modules else None,
        "tracemalloc": sys.modules["tracemalloc"].is_tracing()
        if "tracemalloc" in sys.modules else None,
        "hash_of_abc": hash("abc"),
    }
    state["python_threads"] = sorted(
        [t.name, t.daemon, t is threading.main_thread()] for t in threading.enumerate())
    random_mod = sys.modules.get("random")
    state["per_run"] = {"random": sha(random_mod.getstate()) if random_mod else None}
    # The host reads the outside view while this call waits.
    builtins.call_tool("state_view", pid=os.getpid(), pipe=os.fstat(1).st_ino)
    return state


def _snapcell_outside(ns_pid, pipe_inode):
    """The host's view: finds the cell's process (its pid in its namespace and its stdout
    pipe) and describes it from /proc."""
    import errno
    import os

    def find():
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                if os.readlink("/proc/%s/fd/1" % entry) != "pipe:[%d]" % pipe_inode:
                    continue
                with open("/proc/%s/status" % entry) as f:
                    for line in f:
                        if line.startswith("NSpid:") and line.split()[-1] == str(ns_pid):
                            return int(entry)
            except OSError:
                continue
        return None

    pid = find()
    if pid is None:
        return {"unavailable": "the cell's process cannot be found in /proc (reading a "
                "cell's /proc takes root)"}
    base = "/proc/%d/" % pid
    renames = {}

    def renumber(kind, value):
        table = renames.setdefault(kind, {})
        if value not in table:
            table[value] = "%s#%d" % (kind, len(table))
        return table[value]

    def read(path):
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError as e:
            return {"refused": errno.errorcode.get(e.errno, str(e.errno))}

    def fields(text, drop=()):
        if isinstance(text, dict):
            return text
        out = {}
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key not in drop:
                out[key] = " ".join(value.split())
        return out

    state = {}
    maps = []
    # smaps: each mapping's line of maps, then its sizes and its VmFlags (madvise's marks:
    # dontfork, wipeonfork, hugepage, ...), which maps does not show.
    for line in read(base + "smaps").splitlines():
        if line.startswith("VmFlags:"):
            maps[-1] += " {" + " ".join(sorted(line.split()[1:])) + "}"
            continue
        parts = line.split(None, 5) + [""]
        if "-" not in parts[0] or len(parts[1]) != 4:
            continue  # a size line
        inode = parts[4]
        if parts[3] == "00:00" and inode != "0" or parts[5].startswith(("/tmp", "/dev/shm")):
            inode = renumber("anon", parts[3] + ":" + inode)  # per-cell tmpfs and memfd files
        maps.append(" ".join(parts[:4] + [inode, parts[5].strip()]).rstrip())
    state["maps"] = maps

    varying = {"VmPeak", "VmSize", "VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem", "VmData",
               "VmStk", "VmPTE", "VmExe", "VmLib", "VmSwap", "HugetlbPages",
               "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", "Pid", "PPid", "Tgid",
               "TracerPid", "NSpid", "NStgid", "NSpgid", "NSsid", "Ngid", "Kthread", "State"}
    state["status"] = fields(read(base + "status"), varying)
    if "SigQ" in state["status"]:  # queued signals of every process of the uid, and the limit
        state["status"]["SigQ"] = state["status"]["SigQ"].partition("/")[2]

    threads = []
    tids = sorted(int(t) for t in os.listdir(base + "task"))
    children = []
    for tid in tids:
        tbase = base + "task/%d/" % tid
        st = fields(read(tbase + "status"))
        threads.append({"tid": "leader" if tid == pid else renumber("tid", tid),
                        "comm": read(tbase + "comm"), "sig_blocked": st.get("SigBlk"),
                        "sig_pending": st.get("SigPnd"),
                        "cpus": st.get("Cpus_allowed_list")})
        for child in read(tbase + "children").split():
            children.append({"pid": renumber("child", child), "comm": read("/proc/%s/comm" % child)})
    state["threads"] = threads
    state["children"] = children

    fds = {}
    for fd in sorted(int(n) for n in os.listdir(base + "fd")):
        try:
            target = os.readlink(base + "fd/%d" % fd)
        except OSError:
            continue
        kind, _, number = target[:-1].partition(":[")
        if target.endswith("]") and number.isdigit():  # pipe:[N], socket:[N]
            target = "%s:[%s]" % (kind, renumber(kind, number))
        info = {}
        for line in read(base + "fdinfo/%d" % fd).splitlines():
            key, _, value = line.partition(":")
            value = " ".join(value.split())
            if key == "ino":
                value = renumber("ino", value)
            elif key == "mnt_id":
                value = renumber("mnt", value)
            elif key in ("it_value", "ticks"):
                value = "armed" if value not in ("(0, 0)", "0") else "0"
            elif key == "lock":
                value = " ".join(value.split()[1:4])
            info[key] = info[key] + [value] if key in info else value
        fds[str(fd)] = {"target": target, "fdinfo": info}
    state["fds"] = fds

    timers = read(base + "timers")
    # "notify: signal/pid.N" names the target thread by its host pid.
    state["posix_timers"] = timers if isinstance(timers, dict) else [
        line.replace("pid.%d" % pid, "pid.leader") for line in timers.splitlines()
        if not line.startswith("ID:")]
    for name in ("timerslack_ns", "personality", "oom_score_adj", "coredump_filter",
                 "timens_offsets",
                 "loginuid", "sessionid", "autogroup", "cgroup", "uid_map", "gid_map",
                 "setgroups", "comm", "cmdline", "attr/current"):
        state[name] = read(base + name)
    state["autogroup"] = state["autogroup"].split(" nice ")[-1] \
        if isinstance(state["autogroup"], str) else state["autogroup"]
    state["environ"] = sorted(read(base + "environ").split("\0"))
    # Each cell has a memory cgroup of its own, which the host makes (architecture.md, "Memory
    # cgroups"): the path is renumbered, the controllers kept.
    state["cgroup"] = [line.partition(":")[0] + ":" + line.split(":")[1] + ":" +
                       renumber("cgroup", line.split(":", 2)[2])
                       for line in state["cgroup"].splitlines()] \
        if isinstance(state["cgroup"], str) else state["cgroup"]
    state["cmdline"] = state["cmdline"].split("\0") if isinstance(state["cmdline"], str) \
        else state["cmdline"]
    stat_text = read(base + "stat")
    f = stat_text[stat_text.rindex(")") + 2:].split()
    pick = {"flags": 9, "priority": 18, "nice": 19, "exit_signal": 38, "rt_priority": 40,
            "policy": 41, "start_brk": 47}
    state["stat"] = {k: f[v - 3] for k, v in pick.items()}
    state["stat"]["pgrp_is_pid"] = f[2] == str(pid)
    state["stat"]["session_is_pid"] = f[3] == str(pid)
    ns = {}
    for name in sorted(os.listdir(base + "ns")):
        link = os.readlink(base + "ns/" + name)
        ns[name] = renumber("ns", link)
    state["namespaces"] = ns
    state["mounts"] = [" ".join([renumber("mnt", line.split()[0])] + line.split()[3:])
                       for line in read(base + "mountinfo").splitlines()]
    # SysV IPC objects of the cell's IPC namespace: /proc/sysvipc shows the reader's, so this
    # process joins the cell's (root; the last thing it does).
    libc = __import__("ctypes").CDLL(None, use_errno=True)
    try:
        ipc = os.open(base + "ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
        joined = libc.setns(ipc, 0x08000000) == 0  # CLONE_NEWIPC
        os.close(ipc)
    except OSError:
        joined = False
    state["sysvipc"] = {n: [" ".join(line.split()[:8]) for line in
                            read("/proc/sysvipc/" + n).splitlines()[1:]] if joined else
                        "the cell's IPC namespace cannot be joined" for n in ("msg", "shm", "sem")}
    locks = read("/proc/locks")
    state["locks"] = sorted(" ".join(line.split()[1:4] + line.split()[6:])
                            for line in locks.splitlines()
                            if len(line.split()) > 4 and line.split()[4] == str(pid))
    return state


if hasattr(__import__("builtins"), "call_tool"):
    print(__import__("json").dumps({"inside": _snapcell_inside()}, sort_keys=True))
    del _snapcell_inside, _snapcell_outside
elif __name__ == "__main__" and __import__("sys").argv[1:2] == ["--outside"]:
    _snapcell_argv = __import__("sys").argv
    print(__import__("json").dumps(_snapcell_outside(int(_snapcell_argv[2]),
                                                     int(_snapcell_argv[3])), sort_keys=True))
