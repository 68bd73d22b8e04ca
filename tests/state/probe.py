# A probe of a cell's process state for the differential test (tests/c/integration/
# test_state_diff.c), which checks that a cell reset in place equals a fresh fork: everything
# of a cell's process that a run could change and a later run could see, as one canonical JSON
# description. Not a checker: it says what it sees and the test compares. Standard library and
# ctypes only.
#
# Two views, one file. Run as a run's code in a cell (where `call_tool` is a builtin), it
# describes the process from inside (system calls: a cell has no /proc) and then calls the
# host tool `state_view` with its pid and the inode of its stdout pipe; the test's tool runs
# this file again on the host, `python3 -c PROBE --outside NSPID PIPE_INODE`, which finds that
# process and describes it from its /proc (smaps, threads, fdinfo, timers, locks, children,
# seccomp filters, status, namespaces, SysV IPC), while the cell waits for the answer. The
# inside view prints {"inside": ...}; the test adds the host's as "outside". A cell's
# non-dumpable /proc takes root (or the owner of its user namespace) to read: otherwise the
# outside view is {"unavailable": reason}.
#
# It must not fire the cell's seccomp tripwires (keyctl, add_key, request_key, bpf, ... kill
# the cell), so keyrings are not probed from inside. A call the filter refuses is reported as
# {"refused": "EPERM"}: a stable value, so a change of policy shows too. inside's "per_run"
# holds what must differ between runs (the random generator, re-seeded per run); the rest must
# be equal in two cells forked from one template, and in a reset cell.
#
# Normalised, because it differs between two forks, and only this:
# - kernel object numbers: inodes of pipes, sockets, anonymous inodes and of files on the
#   cell's own tmpfs mounts, mount ids, namespace ids and the cell's cgroup (the host makes
#   each cell's pipes, socket, mounts, namespaces and memory cgroup anew). They become "kind#N"
#   in order of first appearance, so which descriptors share an object stays visible.
# - pids and tids: a fresh cell is pid 1 of its own pid namespace, but a session's worker,
#   its threads and children get what the namespace hands out: "tid#N", "child#N"; the host
#   sees other numbers again (timers' and locks' pids are matched to the process).
# - what counts time or work: timer remainders (kept: interval and whether armed), CPU and
#   memory use, context switches, and the signals queued for the whole uid (SigQ, which other
#   cells of the sandbox, dying, may still hold).
# Mappings keep their addresses: a fork has its parent's layout and a run of the same code
# allocates the same way, so a mapping a run added or a heap end it moved shows as it is.
# Python objects are described by kind, name and a hash of their code or value, never by
# address (a nested code object's repr holds one).


class _SnapcellRenames:
    """Kernel object numbers (inodes, pids) as names in order of appearance: two forks number
    their objects differently, and the description must say only which are the same."""

    def renumber(self, kind, value):
        table = self.renames.setdefault(kind, {})
        if value not in table:
            table[value] = "%s#%d" % (kind, len(table))
        return table[value]


class _SnapcellInside(_SnapcellRenames):
    """The inside view: one method per part of the description, each returning its keys."""

    # What the change programs plant, looked up without creating anything: a SysV key and a
    # POSIX message queue (change.py and the self-test below use the same).
    IPC_KEY = 0x5CE11A7E
    MQ_NAME = b"snapcell-planted"

    def __init__(self):
        import sys

        # Before anything of the probe's own is imported or defined.
        self.modules_at_start = sorted(sys.modules)
        self.main_globals = sorted(sys.modules["__main__"].__dict__)
        import ctypes
        import os

        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long
        self.renames = {}
        # x86_64 and aarch64 numbers of the calls Python has no wrapper for.
        self.nrs = {
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

    def describe_all(self):
        state = {}
        for part in (self.descriptors, self.signals, self.identity, self.process, self.files,
                     self.python_modules, self.python_hooks):
            state.update(part())
        return state

    # Helpers.

    @staticmethod
    def refused(code):
        import errno
        return {"refused": errno.errorcode.get(code, str(code))}

    def call(self, fn, *args):
        try:
            return fn(*args)
        except OSError as e:
            return self.refused(e.errno)

    @staticmethod
    def sha(value):
        import hashlib
        return hashlib.sha256(repr(value).encode()).hexdigest()[:16]

    def syscall(self, name, *args):
        import ctypes
        ctypes.set_errno(0)
        rc = self.libc.syscall(self.nrs[name], *args)
        return self.refused(ctypes.get_errno()) if rc == -1 else rc

    # Descriptors: every number below the soft limit, its type, flags, offset, object.
    def descriptors(self):
        import fcntl
        import os
        import resource
        import stat

        fds = {}
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        for fd in range(min(soft, 1 << 16)):
            try:
                fd_flags = fcntl.fcntl(fd, fcntl.F_GETFD)
            except OSError:
                continue
            st = os.fstat(fd)
            mode = st.st_mode
            # Pipes, sockets, anonymous inodes and unlinked files are the cell's own objects.
            own = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or st.st_nlink == 0 or not (
                stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISCHR(mode))
            fds[str(fd)] = {
                "fd_flags": fd_flags,
                "fl_flags": fcntl.fcntl(fd, fcntl.F_GETFL),
                "type": oct(stat.S_IFMT(mode)),
                "mode": oct(mode),
                "object": self.renumber("obj", (st.st_dev, st.st_ino)) if own else
                [st.st_dev, st.st_ino, st.st_size],
                "offset": self.call(os.lseek, fd, 0, os.SEEK_CUR),
                "pipe_size": self.call(fcntl.fcntl, fd, 1032) if stat.S_ISFIFO(mode) else None,
            }
            if stat.S_ISSOCK(mode):
                fds[str(fd)]["sockopts"] = self.sockopts(fd)
        return {"fds": fds}

    def sockopts(self, fd):
        import os
        import socket

        out = {}
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError as e:
            return self.refused(e.errno)
        with sock:
            for name in ("SO_TYPE", "SO_RCVBUF", "SO_SNDBUF", "SO_RCVLOWAT", "SO_SNDLOWAT",
                         "SO_PRIORITY", "SO_PASSCRED", "SO_KEEPALIVE", "SO_LINGER",
                         "SO_MARK", "SO_BROADCAST", "SO_OOBINLINE", "SO_RCVTIMEO",
                         "SO_SNDTIMEO"):
                opt = getattr(socket, name, None)
                if opt is None:
                    continue
                size = {"SO_LINGER": 8, "SO_RCVTIMEO": 16, "SO_SNDTIMEO": 16}.get(name, 0)
                value = self.call(sock.getsockopt, socket.SOL_SOCKET, opt, size)
                out[name] = value.hex() if isinstance(value, bytes) else value
        return out

    # Signals: every signal's kernel action, Python's handlers, mask, pending, alternate
    # stack; and the interval timers.
    def signals(self):
        import ctypes
        import signal

        class KSigaction(ctypes.Structure):
            _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                        ("restorer", ctypes.c_void_p), ("mask", ctypes.c_uint64)]

        class StackT(ctypes.Structure):
            _fields_ = [("sp", ctypes.c_void_p), ("flags", ctypes.c_int),
                        ("size", ctypes.c_size_t)]

        def action(sig):
            old = KSigaction()
            rc = self.syscall("rt_sigaction", sig, None, ctypes.byref(old), 8)
            return rc if isinstance(rc, dict) else [
                hex(old.handler or 0), hex(old.flags), hex(old.restorer or 0), hex(old.mask)]

        def handler_name(h):  # str() of an IntEnum differs between 3.10 and 3.11
            if h is None:
                return "None"
            if h in (signal.SIG_DFL, signal.SIG_IGN):
                return signal.Handlers(h).name
            return "%s.%s" % (getattr(h, "__module__", "?"), getattr(h, "__qualname__", "?"))

        wakeup = signal.set_wakeup_fd(-1)
        if wakeup != -1:
            signal.set_wakeup_fd(wakeup)
        mask, pending, alt = ctypes.c_uint64(), ctypes.c_uint64(), StackT()
        self.syscall("rt_sigprocmask", 0, None, ctypes.byref(mask), 8)
        self.syscall("rt_sigpending", ctypes.byref(pending), 8)
        rc = self.syscall("sigaltstack", None, ctypes.byref(alt))
        itimers = {}
        for name in ("ITIMER_REAL", "ITIMER_VIRTUAL", "ITIMER_PROF"):
            value, interval = signal.getitimer(getattr(signal, name))
            itimers[name] = {"armed": value > 0, "interval": interval}
        return {
            "sigaction": {str(sig): action(sig) for sig in range(1, 65)},
            "python_signal_handlers": {
                str(int(s)): handler_name(signal.getsignal(s))
                for s in sorted(signal.valid_signals()) if s < signal.SIGRTMIN},
            "python_wakeup_fd": wakeup,
            "sigmask": hex(mask.value),
            "sigpending": hex(pending.value),
            "sigaltstack": rc if isinstance(rc, dict) else [hex(alt.sp or 0), alt.flags,
                                                            alt.size],
            "itimers": itimers,
        }

    # Identity and privileges: credentials, capabilities, prctl values, personality.
    def identity(self):
        import ctypes
        import os

        class CapHeader(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        def prctl(option, arg=0, by_pointer=False):
            out = ctypes.c_ulong()
            rc = self.syscall("prctl", option, ctypes.byref(out) if by_pointer else arg, 0, 0, 0)
            return rc if isinstance(rc, dict) or not by_pointer else out.value

        caps = (ctypes.c_uint32 * 6)()
        rc = self.syscall("capget", ctypes.byref(CapHeader(0x20080522, 0)), caps)
        name = ctypes.create_string_buffer(32)
        self.syscall("prctl", 16, name, 0, 0, 0)  # PR_GET_NAME
        return {
            "creds": {"resuid": os.getresuid(), "resgid": os.getresgid(),
                      "groups": sorted(os.getgroups())},
            "capabilities": rc if isinstance(rc, dict) else [hex(c) for c in caps],
            "capbset": [prctl(23, c) for c in range(64)],  # PR_CAPBSET_READ
            "prctl": {
                "name": name.value.decode("utf-8", "replace"),
                "pdeathsig": prctl(2, by_pointer=True), "dumpable": prctl(3),
                "keepcaps": prctl(7), "seccomp": prctl(21), "tsc": prctl(25, by_pointer=True),
                "securebits": prctl(27), "timerslack": prctl(30), "mce_kill": prctl(34),
                "child_subreaper": prctl(37, by_pointer=True), "no_new_privs": prctl(39),
                "thp_disable": prctl(42), "fp_mode": prctl(46), "speculation": prctl(52, 0),
                "tagged_addr": prctl(56), "io_flusher": prctl(58), "mdwe": prctl(66),
            },
            # A 64-bit argument: the filter compares all of it, and a C int is sign-extended.
            "personality": self.syscall("personality", ctypes.c_ulong(0xFFFFFFFF)),
        }

    # The process: robust futex list, thread pointer, Landlock's answers, rlimits, cwd, umask,
    # scheduling, ids, IPC, children.
    def process(self):
        import ctypes
        import os
        import resource
        import sys

        head, head_len = ctypes.c_void_p(), ctypes.c_size_t()
        rc = self.syscall("get_robust_list", 0, ctypes.byref(head), ctypes.byref(head_len))
        state = {"robust_list": rc if isinstance(rc, dict) else [hex(head.value or 0),
                                                                 head_len.value]}
        if "arch_prctl" in self.nrs:  # the thread pointer (ARCH_GET_FS)
            fs = ctypes.c_ulong()
            rc = self.syscall("arch_prctl", 0x1003, ctypes.byref(fs))
            state["fs_base"] = rc if isinstance(rc, dict) else hex(fs.value)
        # Landlock: the call is refused (ENOSYS); what the domain allows shows in what opens.
        state["landlock_abi"] = self.syscall("landlock_create_ruleset", None, 0, 1)
        access = {}
        for path, flags in (("/", os.O_RDONLY | os.O_DIRECTORY), ("/etc/passwd", os.O_RDONLY),
                            ("/etc/hostname", os.O_RDONLY), ("/usr", os.O_RDONLY),
                            ("/tmp", os.O_WRONLY | os.O_TMPFILE),
                            ("/output", os.O_WRONLY | os.O_TMPFILE),
                            ("/dev/null", os.O_WRONLY), (sys.executable, os.O_RDONLY)):
            key = "%s %o" % (path, flags)
            access[key] = self.call(lambda: os.close(os.open(path, flags | os.O_CLOEXEC))) \
                or "ok"
        state["path_access"] = access
        state["rlimits"] = {n: resource.getrlimit(getattr(resource, n))
                            for n in sorted(dir(resource)) if n.startswith("RLIMIT_")}
        state["cwd"] = self.call(os.getcwd)
        old_umask = os.umask(0o22)
        os.umask(old_umask)
        state["umask"] = oct(old_umask)
        state["sched"] = {"policy": self.call(os.sched_getscheduler, 0),
                          "param": getattr(self.call(os.sched_getparam, 0), "sched_priority",
                                           None),
                          "nice": self.call(os.getpriority, os.PRIO_PROCESS, 0),
                          "affinity": sorted(self.call(os.sched_getaffinity, 0))}
        state["process"] = {"pid": os.getpid(), "ppid": os.getppid(),
                            "pgrp_is_pid": os.getpgrp() == os.getpid(),
                            "sid_is_pid": os.getsid(0) == os.getpid()}
        state["uname"] = list(os.uname())
        # Keyrings: keyctl, add_key and request_key are tripwires (the cell dies), so a run
        # cannot make or join one and the probe does not ask. IPC: the calls' answers.
        state["keyrings"] = "not probed: keyctl, add_key and request_key kill the cell"
        state["sysv_ipc"] = {"shmget": self.syscall("shmget", self.IPC_KEY, 0, 0),
                             "msgget": self.syscall("msgget", self.IPC_KEY, 0),
                             "semget": self.syscall("semget", self.IPC_KEY, 0, 0)}
        mq = self.syscall("mq_open", self.MQ_NAME, os.O_RDONLY, 0, None)
        if not isinstance(mq, dict):
            os.close(mq)
            mq = "exists"
        state["mq_open"] = mq
        # Children the process could wait for (WNOWAIT: none is reaped).
        try:
            state["waitable_child"] = os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED |
                                                os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            state["waitable_child"] = "none"
        state["environ"] = sorted(os.environ.items())
        return state

    # Files the next run could see.
    def files(self):
        import os
        import stat

        def tree(top):
            out = []
            for root, dirs, names in os.walk(top):
                dirs.sort()
                for n in sorted(dirs + names):
                    p = os.path.join(root, n)
                    st = os.lstat(p)
                    out.append([p, oct(st.st_mode),
                                st.st_size if stat.S_ISREG(st.st_mode) else 0])
            return out

        return {"tmp": tree("/tmp"), "output": tree("/output"),
                "dev_shm": sorted(self.call(os.listdir, "/dev/shm") or ())
                if os.path.isdir("/dev/shm") else None}

    # Python-level state: modules and their attributes, builtins, globals, sys.
    def code_key(self, code):  # a nested code object's repr holds its address
        import types
        return (code.co_filename, code.co_firstlineno, code.co_code,
                [self.code_key(c) if isinstance(c, types.CodeType) else repr(c)
                 for c in code.co_consts])

    def describe(self, value, depth=0):
        import types

        code = getattr(value, "__code__", None)
        if isinstance(value, types.BuiltinFunctionType):
            return ["builtin", value.__qualname__, type(value.__self__).__name__]
        if isinstance(code, types.CodeType):
            return ["function", getattr(value, "__qualname__", "?"), self.sha(self.code_key(code))]
        if isinstance(value, types.ModuleType):
            return ["module", value.__name__]
        if isinstance(value, type):
            if depth == 0 and value.__module__ != "builtins":
                return ["class", value.__qualname__, self.sha(sorted(
                    (k, self.describe(v, 1)) for k, v in list(vars(value).items())))]
            return ["class", value.__qualname__]
        if isinstance(value, (int, float, str, bytes, bool, type(None))):
            return ["value", self.sha(value)]
        if isinstance(value, (tuple, frozenset)) and len(value) < 64:
            return ["value", type(value).__name__, self.sha(sorted(repr(v) for v in value))]
        if isinstance(value, (list, dict, set)) and len(value) < 4096:
            return [type(value).__name__, len(value)]
        return [type(value).__name__]

    def python_modules(self):
        import builtins
        import sys
        import threading

        describe = self.describe
        skip_attrs = {"__loader__", "__spec__", "__cached__", "__builtins__"}
        module_attrs = {}
        for mod_name in self.modules_at_start:
            try:
                items = sorted(vars(sys.modules.get(mod_name)).items())
            except TypeError:
                module_attrs[mod_name] = [type(sys.modules.get(mod_name)).__name__]
                continue
            attrs = [(k, describe(v)) for k, v in items
                     if k not in skip_attrs and not k.lower().startswith("_snapcell")]
            module_attrs[mod_name] = attrs if mod_name == "__main__" else self.sha(attrs)
        return {
            "sys_modules": self.modules_at_start,
            "module_attrs": module_attrs,
            "builtins": {k: describe(v) for k, v in sorted(vars(builtins).items()) if k != "_"},
            "main_globals": [n for n in self.main_globals if not n.lower().startswith("_snapcell")],
            "sys": {
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
            },
        }

    # Python's hooks, threads and random generator ("per_run": it must differ between runs).
    def python_hooks(self):
        import atexit
        import gc
        import locale
        import sys
        import threading
        import warnings

        describe = self.describe
        random_mod = sys.modules.get("random")
        return {
            "python_hooks": {
                "atexit_callbacks": atexit._ncallbacks(),
                "gc_enabled": gc.isenabled(),
                "gc_threshold": gc.get_threshold(),
                "gc_callbacks": [describe(c) for c in gc.callbacks],
                "gc_freeze_count": gc.get_freeze_count(),
                "warnings_filters": self.sha(warnings.filters),
                "locale": locale.setlocale(locale.LC_ALL, None),
                "faulthandler": sys.modules["faulthandler"].is_enabled()
                if "faulthandler" in sys.modules else None,
                "tracemalloc": sys.modules["tracemalloc"].is_tracing()
                if "tracemalloc" in sys.modules else None,
                "hash_of_abc": hash("abc"),
            },
            "python_threads": sorted([t.name, t.daemon, t is threading.main_thread()]
                                     for t in threading.enumerate()),
            "per_run": {"random": self.sha(random_mod.getstate()) if random_mod else None},
        }


def _snapcell_inside():
    import builtins
    import os

    state = _SnapcellInside().describe_all()
    # The host reads the outside view while this call waits.
    builtins.call_tool("state_view", pid=os.getpid(), pipe=os.fstat(1).st_ino)
    return state


class _SnapcellOutside(_SnapcellRenames):
    """The host's view of the cell's process, from its /proc: one method per part."""

    def __init__(self, pid):
        self.pid = pid
        self.base = "/proc/%d/" % pid
        self.renames = {}

    @staticmethod
    def find(ns_pid, pipe_inode):
        """The host pid of the process with this pid in its own namespace and this stdout
        pipe, or None (none, or /proc unreadable)."""
        import os

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

    def describe_all(self):
        state = {}
        for part in (self.mappings, self.status_and_threads, self.descriptors, self.files,
                     self.namespaces, self.ipc_and_locks):
            state.update(part())
        return state

    # Helpers.

    @staticmethod
    def read(path):
        import errno
        try:
            with open(path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError as e:
            return {"refused": errno.errorcode.get(e.errno, str(e.errno))}

    @staticmethod
    def fields(text, drop=()):
        if isinstance(text, dict):
            return text
        out = {}
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key not in drop:
                out[key] = " ".join(value.split())
        return out

    # smaps: each mapping's line of maps, then its sizes and its VmFlags (madvise's marks:
    # dontfork, wipeonfork, hugepage, ...), which maps does not show.
    def mappings(self):
        maps = []
        for line in self.read(self.base + "smaps").splitlines():
            if line.startswith("VmFlags:"):
                maps[-1] += " {" + " ".join(sorted(line.split()[1:])) + "}"
                continue
            parts = line.split(None, 5) + [""]
            if "-" not in parts[0] or len(parts[1]) != 4:
                continue  # a size line
            inode = parts[4]
            if parts[3] == "00:00" and inode != "0" or parts[5].startswith(("/tmp", "/dev/shm")):
                inode = self.renumber("anon", parts[3] + ":" + inode)  # per-cell tmpfs, memfd
            maps.append(" ".join(parts[:4] + [inode, parts[5].strip()]).rstrip())
        return {"maps": maps}

    # status (without what counts time, memory or work, or names pids), stat's state fields,
    # threads with their masks, children.
    def status_and_threads(self):
        import os

        varying = {"VmPeak", "VmSize", "VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem",
                   "VmData", "VmStk", "VmPTE", "VmExe", "VmLib", "VmSwap", "HugetlbPages",
                   "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", "Pid", "PPid",
                   "Tgid", "TracerPid", "NSpid", "NStgid", "NSpgid", "NSsid", "Ngid",
                   "Kthread", "State"}
        status = self.fields(self.read(self.base + "status"), varying)
        if "SigQ" in status:  # queued signals of every process of the uid, and the limit
            status["SigQ"] = status["SigQ"].partition("/")[2]
        threads, children = [], []
        for tid in sorted(int(t) for t in os.listdir(self.base + "task")):
            tbase = self.base + "task/%d/" % tid
            st = self.fields(self.read(tbase + "status"))
            threads.append({"tid": "leader" if tid == self.pid else self.renumber("tid", tid),
                            "comm": self.read(tbase + "comm"), "sig_blocked": st.get("SigBlk"),
                            "sig_pending": st.get("SigPnd"),
                            "cpus": st.get("Cpus_allowed_list")})
            for child in self.read(tbase + "children").split():
                children.append({"pid": self.renumber("child", child),
                                 "comm": self.read("/proc/%s/comm" % child)})
        text = self.read(self.base + "stat")
        f = text[text.rindex(")") + 2:].split()  # f[0] is field 3
        pick = {"flags": 9, "priority": 18, "nice": 19, "exit_signal": 38, "rt_priority": 40,
                "policy": 41, "start_brk": 47}
        stat = {k: f[v - 3] for k, v in pick.items()}
        stat["pgrp_is_pid"] = f[2] == str(self.pid)
        stat["session_is_pid"] = f[3] == str(self.pid)
        return {"status": status, "threads": threads, "children": children, "stat": stat}

    # Descriptors: targets (pipes and sockets renumbered) and fdinfo (flags, offset, timers,
    # locks, eventfd counts, ...).
    def descriptors(self):
        import os

        fds = {}
        for fd in sorted(int(n) for n in os.listdir(self.base + "fd")):
            try:
                target = os.readlink(self.base + "fd/%d" % fd)
            except OSError:
                continue
            kind, _, number = target[:-1].partition(":[")
            if target.endswith("]") and number.isdigit():  # pipe:[N], socket:[N]
                target = "%s:[%s]" % (kind, self.renumber(kind, number))
            info = {}
            for line in self.read(self.base + "fdinfo/%d" % fd).splitlines():
                key, _, value = line.partition(":")
                value = " ".join(value.split())
                if key == "ino":
                    value = self.renumber("ino", value)
                elif key == "mnt_id":
                    value = self.renumber("mnt", value)
                elif key in ("it_value", "ticks"):
                    value = "armed" if value not in ("(0, 0)", "0") else "0"
                elif key == "lock":
                    value = " ".join(value.split()[1:4])
                info[key] = info[key] + [value] if key in info else value
            fds[str(fd)] = {"target": target, "fdinfo": info}
        return {"fds": fds}

    # The one-value files, POSIX timers, environment, command line, cgroup.
    def files(self):
        read = self.read
        state = {name: read(self.base + name) for name in (
            "timerslack_ns", "personality", "oom_score_adj", "coredump_filter",
            "timens_offsets", "loginuid", "sessionid", "uid_map", "gid_map", "setgroups",
            "comm", "attr/current")}
        timers = read(self.base + "timers")
        # "notify: signal/pid.N" names the target thread by its host pid.
        state["posix_timers"] = timers if isinstance(timers, dict) else [
            line.replace("pid.%d" % self.pid, "pid.leader") for line in timers.splitlines()
            if not line.startswith("ID:")]
        autogroup = read(self.base + "autogroup")  # "/autogroup-N nice K": N is per session
        state["autogroup"] = autogroup.split(" nice ")[-1] if isinstance(autogroup, str) \
            else autogroup
        state["environ"] = sorted(read(self.base + "environ").split("\0"))
        cmdline = read(self.base + "cmdline")
        state["cmdline"] = cmdline.split("\0") if isinstance(cmdline, str) else cmdline
        # Each cell has a memory cgroup of its own, which the host makes (architecture.md,
        # "Memory cgroups"): the path is renumbered, the controllers kept.
        cgroup = read(self.base + "cgroup")
        state["cgroup"] = [":".join(line.split(":", 2)[:2] + [
            self.renumber("cgroup", line.split(":", 2)[2])]) for line in cgroup.splitlines()] \
            if isinstance(cgroup, str) else cgroup
        return state

    def namespaces(self):
        import os

        return {
            "namespaces": {name: self.renumber("ns", os.readlink(self.base + "ns/" + name))
                           for name in sorted(os.listdir(self.base + "ns"))},
            "mounts": [" ".join([self.renumber("mnt", line.split()[0])] + line.split()[3:])
                       for line in self.read(self.base + "mountinfo").splitlines()],
        }

    # SysV IPC objects of the cell's IPC namespace: /proc/sysvipc shows the reader's, so this
    # process joins the cell's (root), after everything else; and the locks the process holds.
    def ipc_and_locks(self):
        import ctypes
        import os

        libc = ctypes.CDLL(None, use_errno=True)
        try:
            ipc = os.open(self.base + "ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
            joined = libc.setns(ipc, 0x08000000) == 0  # CLONE_NEWIPC
            os.close(ipc)
        except OSError:
            joined = False
        sysvipc = {n: [" ".join(line.split()[:4]) for line in
                       self.read("/proc/sysvipc/" + n).splitlines()[1:]] if joined else
                   "the cell's IPC namespace cannot be joined" for n in ("msg", "shm", "sem")}
        locks = self.read("/proc/locks")  # pids as the host sees them
        return {"sysvipc": sysvipc, "locks": sorted(
            " ".join(line.split()[1:4] + line.split()[6:]) for line in locks.splitlines()
            if len(line.split()) > 4 and line.split()[4] == str(self.pid))}


def _snapcell_outside(ns_pid, pipe_inode):
    pid = _SnapcellOutside.find(ns_pid, pipe_inode)
    if pid is None:
        return {"unavailable": "the cell's process cannot be found in /proc (reading a "
                "cell's /proc takes root)"}
    return _SnapcellOutside(pid).describe_all()


def _snapcell_self_test():
    """On the host (`--self-test`): makes, in this process, the changes a cell's filter
    refuses, so that the probes of those keys are shown to see a difference too. Prints the
    inside view before and after, the keys each change must show ("changed", as change.py's,
    under the same item names) and what could not be changed here, and why ("refused")."""
    import os

    probe = _SnapcellInside()
    parts = (probe.descriptors, probe.signals, probe.identity, probe.process)
    libc = probe.libc
    nrs = dict(probe.nrs, **{
        "x86_64": {"seccomp": 317, "capset": 126, "shmctl": 31, "landlock_restrict_self": 446},
        "aarch64": {"seccomp": 277, "capset": 91, "shmctl": 195, "landlock_restrict_self": 446},
    }[os.uname().machine])
    r, w = os.pipe()
    # What an earlier self-test that died left (its own undo below did not run).
    stale = libc.syscall(nrs["shmget"], probe.IPC_KEY, 0, 0)
    if stale >= 0:
        libc.syscall(nrs["shmctl"], stale, 0, None)  # IPC_RMID
    libc.mq_unlink(b"/" + probe.MQ_NAME)
    before = {}
    for part in parts:
        before.update(part())
    changed, refused, undo = {}, {}, []
    try:
        _snapcell_self_test_changes(probe, nrs, w, changed, refused, undo)
        after = {}
        for part in parts:
            after.update(part())
    finally:
        for fn in undo:
            fn()
    return {"before": {"inside": before}, "after": {"inside": after},
            "changed": changed, "refused": refused}


def _snapcell_self_test_changes(probe, nrs, w, changed, refused, undo):
    import ctypes
    import errno
    import fcntl
    import os
    import signal

    libc = probe.libc

    def syscall(name, *args):
        ctypes.set_errno(0)
        rc = libc.syscall(nrs[name], *args)
        if rc == -1:
            raise OSError(ctypes.get_errno(), name)
        return rc

    def attempt(item, keys, fn, needs_root=False):
        if needs_root and os.geteuid() != 0:
            refused[item] = "needs root on the host"
            return
        try:
            fn()
            changed[item] = ["inside/" + k for k in keys]
        except OSError as e:
            refused[item] = errno.errorcode.get(e.errno, str(e.errno))

    # Groups and ids first: a change of ids clears keepcaps, and dropping the capabilities
    # ends root's right to change them.
    attempt("groups", ["creds/groups"], lambda: os.setgroups([54321]), needs_root=True)
    attempt("uid", ["creds/resuid"], lambda: os.setresuid(-1, -1, 65534), needs_root=True)
    cpus = sorted(os.sched_getaffinity(0))
    attempt("nice", ["sched/nice"], lambda: os.setpriority(
        os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + 1))
    if len(cpus) > 1:
        attempt("affinity", ["sched/affinity"], lambda: os.sched_setaffinity(0, cpus[:1]))
    else:
        refused["affinity"] = "not tried: one CPU, nothing to narrow"
    attempt("scheduling policy", ["sched/policy"],
            lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0)))
    attempt("new session", ["process/sid_is_pid"], os.setsid)
    attempt("pipe size", ["fds/%d/pipe_size" % w],
            lambda: fcntl.fcntl(w, 1031, 2 * fcntl.fcntl(w, 1032)))  # F_SETPIPE_SZ
    for item, option, arg, key in (
            ("prctl pdeathsig", 1, signal.SIGUSR2, "pdeathsig"),
            ("prctl dumpable", 4, 0, "dumpable"), ("prctl keepcaps", 8, 1, "keepcaps"),
            ("prctl timerslack", 29, 12345, "timerslack"),
            ("prctl child_subreaper", 36, 1, "child_subreaper"),
            ("prctl thp_disable", 41, 1, "thp_disable"),
            ("prctl no_new_privs", 38, 1, "no_new_privs")):
        attempt(item, ["prctl/" + key], lambda o=option, a=arg: syscall("prctl", o, a, 0, 0, 0))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    allow = (ctypes.c_uint64 * 1)(0x7FFF000000000006)  # BPF_RET|BPF_K SECCOMP_RET_ALLOW
    attempt("seccomp filter", ["prctl/seccomp"], lambda: syscall(
        "seccomp", 1, 0, ctypes.byref(SockFprog(1, ctypes.addressof(allow)))))
    attempt("personality", ["personality"],
            lambda: syscall("personality", ctypes.c_ulong(0x0040000)))  # ADDR_NO_RANDOMIZE

    def shm():
        shm_id = syscall("shmget", probe.IPC_KEY, 4096, 0o3600)  # IPC_CREAT | IPC_EXCL
        undo.append(lambda: libc.syscall(nrs["shmctl"], shm_id, 0, None))  # IPC_RMID

    attempt("sysv shared memory", ["sysv_ipc/shmget"], shm)

    def mq():
        os.close(syscall("mq_open", probe.MQ_NAME, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600,
                         None))
        undo.append(lambda: libc.mq_unlink(b"/" + probe.MQ_NAME))

    attempt("posix message queue", ["mq_open"], mq)

    class CapHeader(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    attempt("capability bounding set", ["capbset"], lambda: syscall("prctl", 24, 0, 0, 0, 0),
            needs_root=True)  # PR_CAPBSET_DROP CAP_CHOWN
    # PR_SET_SECUREBITS: keepcaps is one of the bits, so it is kept; SECBIT_NOROOT added.
    attempt("securebits", ["prctl/securebits"],
            lambda: syscall("prctl", 28, syscall("prctl", 27, 0, 0, 0, 0) | 1, 0, 0, 0),
            needs_root=True)
    attempt("capabilities", ["capabilities"], lambda: syscall(
        "capset", ctypes.byref(CapHeader(0x20080522, 0)), (ctypes.c_uint32 * 6)()),
        needs_root=True)

    # Landlock last: a domain that handles listing directories, with no rule, so no directory
    # opens (files and message queues still do).
    def landlock():
        attr = (ctypes.c_uint64 * 1)(1 << 3)  # LANDLOCK_ACCESS_FS_READ_DIR
        fd = syscall("landlock_create_ruleset", ctypes.byref(attr), 8, 0)
        syscall("landlock_restrict_self", fd, 0)

    attempt("landlock", ["path_access"], landlock)
    refused["namespace"] = "not tried here: only the outside view shows it"
    refused["mapping name"] = "not tried here: only the outside view shows it"
    refused["keyrings"] = "not probed (keyctl is a tripwire in a cell)"


if hasattr(__import__("builtins"), "call_tool"):
    print(__import__("json").dumps({"inside": _snapcell_inside()}, sort_keys=True))
    del _SnapcellInside, _SnapcellOutside, _snapcell_inside, _snapcell_outside
    del _snapcell_self_test, _snapcell_self_test_changes
elif __name__ == "__main__" and __import__("sys").argv[1:2] == ["--self-test"]:
    print(__import__("json").dumps(_snapcell_self_test(), sort_keys=True))
elif __name__ == "__main__" and __import__("sys").argv[1:2] == ["--outside"]:
    _snapcell_argv = __import__("sys").argv
    print(__import__("json").dumps(_snapcell_outside(int(_snapcell_argv[2]),
                                                     int(_snapcell_argv[3])), sort_keys=True))
