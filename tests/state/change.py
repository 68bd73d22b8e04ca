# The "change everything" run of the differential test (tests/c/integration/test_state_diff.c):
# alters, from inside a cell and under its seccomp filter, each piece of process state that
# tests/state/probe.py describes, and prints one JSON line saying what it changed and which
# keys of the probe's description must show it ("changed": item -> ["inside/umask", ...]),
# and what it could not change and why ("refused": item -> "EPERM"). A key can also be
# [key, text]: the text must be in the key's value after and not before. "changed_in_run"
# holds what the host undoes between runs, which only a probe in the same run can see. Not an
# attack test: the point is that a probe which cannot see its own planted change fails the
# test.
#
# It leaves what it made alive for the next run of the same process (a session's): a thread
# blocked on an event, a child blocked in pause(), a timer, a mapping, an alternate signal
# stack, open descriptors, a lock. Calls that kill the cell (keyctl, add_key, request_key,
# the other tripwires) are not made; they are listed as refused with the reason.


def _snapcell_change():
    import atexit
    import base64
    import builtins
    import ctypes
    import errno
    import fcntl
    import gc
    import mmap
    import os
    import random
    import resource
    import signal
    import socket
    import sys
    import threading
    import types
    import warnings

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    nrs = {
        "x86_64": {"rt_sigaction": 13, "sigaltstack": 131, "personality": 135, "capset": 126,
                   "landlock_create_ruleset": 444, "shmget": 29, "mq_open": 240,
                   "seccomp": 317, "prctl": 157, "unshare": 272, "timer_create": 222,
                   "timer_settime": 223, "set_robust_list": 273},
        "aarch64": {"rt_sigaction": 134, "sigaltstack": 132, "personality": 92, "capset": 91,
                    "landlock_create_ruleset": 444, "shmget": 194, "mq_open": 180,
                    "seccomp": 277, "prctl": 167, "unshare": 97, "timer_create": 107,
                    "timer_settime": 110, "set_robust_list": 99},
    }[os.uname().machine]
    changed = {}
    refused = {}
    keep = planted_keep  # noqa: F821 (a global of the run: what must outlive this function)

    def syscall(nr, *args):
        ctypes.set_errno(0)
        rc = libc.syscall(nr, *args)
        if rc == -1:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return rc

    def attempt(item, keys, fn):
        try:
            fn()
            changed[item] = keys
        except OSError as e:
            refused[item] = errno.errorcode.get(e.errno, str(e.errno))

    # A child first, while the process has one thread: it waits in pause() for good.
    def child():
        pid = os.fork()
        if pid == 0:
            while True:
                signal.pause()
        keep.append(pid)

    attempt("child process", ["outside/children", "inside/waitable_child"], child)
    attempt("umask", ["inside/umask", "outside/status/Umask"], lambda: os.umask(0o077))
    attempt("cwd", ["inside/cwd"], lambda: os.chdir("/usr"))
    attempt("environment", [["inside/environ", "SNAPCELL_PLANTED"]],
            lambda: os.environ.__setitem__("SNAPCELL_PLANTED", "1"))

    def rlimit():
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft - 1, hard))

    attempt("rlimit", ["inside/rlimits/RLIMIT_NOFILE"], rlimit)
    usr1, hup, winch = (str(int(s)) for s in (signal.SIGUSR1, signal.SIGHUP, signal.SIGWINCH))
    attempt("signal handler", ["inside/sigaction/" + usr1, "inside/python_signal_handlers/" + usr1,
                               "outside/status/SigCgt"],
            lambda: signal.signal(signal.SIGUSR1, lambda *a: None))
    attempt("ignored signal", ["inside/sigaction/" + hup, "inside/python_signal_handlers/" + hup,
                               "outside/status/SigIgn"],
            lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))

    class KSigaction(ctypes.Structure):
        _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                    ("restorer", ctypes.c_void_p), ("mask", ctypes.c_uint64)]

    def sigaction_flags():  # SIG_DFL kept, only the flags and the mask change
        act = KSigaction(0, 0x08000000, 0, 1 << (signal.SIGTERM - 1))  # SA_ONSTACK
        syscall(nrs["rt_sigaction"], signal.SIGWINCH, ctypes.byref(act), None, 8)

    attempt("sigaction flags", ["inside/sigaction/" + winch], sigaction_flags)
    attempt("signal mask", ["inside/sigmask", "outside/status/SigBlk"],
            lambda: signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2}))
    attempt("pending signal", ["inside/sigpending", "outside/status/ShdPnd"],
            lambda: os.kill(os.getpid(), signal.SIGUSR2))

    def altstack():
        stack = ctypes.create_string_buffer(1 << 16)
        keep.append(stack)

        class StackT(ctypes.Structure):
            _fields_ = [("sp", ctypes.c_void_p), ("flags", ctypes.c_int),
                        ("size", ctypes.c_size_t)]

        syscall(nrs["sigaltstack"], ctypes.byref(StackT(ctypes.addressof(stack), 0, 1 << 16)),
                None)

    attempt("sigaltstack", ["inside/sigaltstack"], altstack)
    attempt("interval timer", ["inside/itimers"],
            lambda: signal.setitimer(signal.ITIMER_PROF, 1000, 1000))

    class Timespec(ctypes.Structure):
        _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]

    class Itimerspec(ctypes.Structure):
        _fields_ = [("interval", Timespec), ("value", Timespec)]

    def posix_timer():  # the kernel's call: glibc's encodes the clock another way
        timer = ctypes.c_int()
        syscall(nrs["timer_create"], 2, None, ctypes.byref(timer))  # CLOCK_PROCESS_CPUTIME_ID
        spec = Itimerspec(Timespec(1000, 0), Timespec(1000, 0))
        syscall(nrs["timer_settime"], timer.value, 0, ctypes.byref(spec), None)

    attempt("posix timer", ["outside/posix_timers"], posix_timer)

    # Descriptors are named by number, so that another item's descriptor cannot stand in.
    def fd_item(item, make, outside_text=None):
        try:
            fd = make()
        except OSError as e:
            refused[item] = errno.errorcode.get(e.errno, str(e.errno))
            return None
        changed[item] = ["inside/fds/%d" % fd, "outside/fds/%d" % fd]
        if outside_text:
            changed[item].append(["outside/fds/%d" % fd, outside_text])
        return fd

    def timerfd():
        fd = libc.timerfd_create(1, 0o2000000)  # CLOCK_MONOTONIC, TFD_CLOEXEC
        if fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create")
        spec = Itimerspec(Timespec(0, 0), Timespec(100000, 0))
        if libc.timerfd_settime(fd, 0, ctypes.byref(spec), None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime")
        return fd

    fd_item("timerfd", timerfd, "timerfd")
    fd_item("descriptor", lambda: os.dup2(os.open("/dev/null", os.O_RDONLY), 40))
    pipe_w = fd_item("pipe with flags", lambda: os.pipe2(os.O_NONBLOCK)[1])
    if pipe_w is not None:
        attempt("pipe size", ["inside/fds/%d" % pipe_w],
                lambda: fcntl.fcntl(pipe_w, 1031, 1 << 16))  # F_SETPIPE_SZ

    def file_and_lock():
        fd = os.open("/tmp/planted-lock", os.O_RDWR | os.O_CREAT, 0o600)
        os.write(fd, b"abc")
        fcntl.lockf(fd, fcntl.LOCK_EX)
        return fd

    lock_fd = fd_item("file, offset and lock", file_and_lock)
    if lock_fd is not None:
        changed["file, offset and lock"] += [["inside/tmp", "/tmp/planted-lock"],
                                             "outside/locks"]

    def wakeup_fd():
        a, b = socket.socketpair()
        a.setblocking(False)
        keep.extend([a, b])
        signal.set_wakeup_fd(a.fileno())

    attempt("signal wakeup fd", ["inside/python_wakeup_fd"], wakeup_fd)

    # A mapping, named by its address: a later run's own allocations may move the heap's end
    # and add arenas, so "maps differs" alone would prove nothing. Then a name for another
    # (PR_SET_VMA, which the filter allows) and a madvise mark on a third.
    def mapping(pages, prot):
        m = mmap.mmap(-1, pages * mmap.PAGESIZE, flags=mmap.MAP_PRIVATE)
        keep.append(m)
        address = ctypes.addressof(ctypes.c_char.from_buffer(m))
        if prot is not None and libc.mprotect(ctypes.c_void_p(address + mmap.PAGESIZE),
                                              mmap.PAGESIZE, prot) != 0:
            raise OSError(ctypes.get_errno(), "mprotect")
        return address

    def planted_mapping():
        address = mapping(3, 1) + mmap.PAGESIZE  # PROT_READ
        changed["mapping"] = [["outside/maps", "%x-%x r--p" % (address,
                                                               address + mmap.PAGESIZE)]]

    def named_mapping():
        address = mapping(2, None)
        syscall(nrs["prctl"], 0x53564D41, 0, ctypes.c_void_p(address),  # PR_SET_VMA_ANON_NAME
                2 * mmap.PAGESIZE, b"planted")
        changed["mapping name"] = [["outside/maps", "%x-%x rw-p" % (
            address, address + 2 * mmap.PAGESIZE)], ["outside/maps", "[anon:planted]"]]

    def marked_mapping():
        address = mapping(4, None)
        if libc.madvise(ctypes.c_void_p(address), 4 * mmap.PAGESIZE, 10) != 0:  # DONTFORK
            raise OSError(ctypes.get_errno(), "madvise")
        changed["mapping mark"] = [["outside/maps", "%x-%x rw-p" % (
            address, address + 4 * mmap.PAGESIZE)]]

    for item, fn in (("mapping", planted_mapping), ("mapping name", named_mapping),
                     ("mapping mark", marked_mapping)):
        try:
            fn()
        except OSError as e:
            refused[item] = errno.errorcode.get(e.errno, str(e.errno))

    class RobustListHead(ctypes.Structure):  # an empty list: its next is itself
        _fields_ = [("next", ctypes.c_void_p), ("offset", ctypes.c_long),
                    ("pending", ctypes.c_void_p)]

    def robust_list():
        head = RobustListHead(None, 0, None)
        head.next = ctypes.addressof(head)
        keep.append(head)
        syscall(nrs["set_robust_list"], ctypes.byref(head), ctypes.sizeof(head))

    attempt("robust futex list", ["inside/robust_list"], robust_list)

    def frame_socket_option():
        sock = socket.socket(fileno=os.dup(3))
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PRIORITY, 3)

    attempt("socket option", ["inside/fds/3/sockopts/SO_PRIORITY"], frame_socket_option)
    attempt("stdout flags", ["inside/fds/1/fl_flags", "outside/fds/1"],
            lambda: fcntl.fcntl(1, fcntl.F_SETFL, fcntl.fcntl(1, fcntl.F_GETFL) | os.O_APPEND))
    attempt("thread", [["inside/python_threads", "planted"], "outside/threads",
                       "outside/status/Threads"],
            lambda: threading.Thread(target=threading.Event().wait, name="planted",
                                     daemon=True).start())
    attempt("name", ["inside/prctl/name", "outside/status/Name", "outside/comm"],
            lambda: syscall(nrs["prctl"], 15, b"planted", 0, 0, 0))
    attempt("posix shared memory", [["inside/dev_shm", "planted"]],
            lambda: os.close(os.open("/dev/shm/planted", os.O_CREAT | os.O_RDWR, 0o600)))
    attempt("/tmp", [["inside/tmp", "/tmp/planted\""]], lambda: open("/tmp/planted", "w").close())
    # The host collects and empties /output after every run, a session's too: this one shows
    # only to a probe in the same run ("changed_in_run").
    try:
        open("/output/planted", "w").close()
        in_run = {"/output": [["inside/output", "/output/planted"]]}
    except OSError as e:
        in_run = {}
        refused["/output"] = errno.errorcode.get(e.errno, str(e.errno))

    # What the filter refuses (each would show in the named keys if it did not).
    attempt("new session", ["inside/process"], os.setsid)
    attempt("nice", ["inside/sched/nice"], lambda: os.setpriority(os.PRIO_PROCESS, 0, 5))
    attempt("affinity", ["inside/sched/affinity"], lambda: os.sched_setaffinity(0, {0}))
    attempt("scheduling policy", ["inside/sched/policy"],
            lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)))
    attempt("groups", ["inside/creds"], lambda: os.setgroups([]))
    attempt("uid", ["inside/creds"], lambda: os.setresuid(-1, -1, os.getuid()))

    class CapHeader(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    attempt("capabilities", ["inside/capabilities"],
            lambda: syscall(nrs["capset"], ctypes.byref(CapHeader(0x20080522, 0)),
                            (ctypes.c_uint32 * 6)()))
    for item, option, arg in (("pdeathsig", 1, signal.SIGKILL), ("dumpable", 4, 1),
                              ("keepcaps", 8, 1), ("timerslack", 29, 12345),
                              ("child_subreaper", 36, 1), ("thp_disable", 41, 1),
                              ("no_new_privs", 38, 1)):
        attempt("prctl " + item, ["inside/prctl/" + item],
                lambda o=option, a=arg: syscall(nrs["prctl"], o, a, 0, 0, 0))

    attempt("capability bounding set", ["inside/capbset"],
            lambda: syscall(nrs["prctl"], 24, 0, 0, 0, 0))  # PR_CAPBSET_DROP
    attempt("securebits", ["inside/prctl/securebits"],
            lambda: syscall(nrs["prctl"], 28, 1, 0, 0, 0))  # PR_SET_SECUREBITS

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    allow = (ctypes.c_uint64 * 1)(0x7FFF000000000006)  # BPF_RET|BPF_K SECCOMP_RET_ALLOW
    attempt("seccomp filter", ["outside/status/Seccomp_filters"],
            lambda: syscall(nrs["seccomp"], 1, 0, ctypes.byref(SockFprog(1, ctypes.addressof(
                allow)))))
    attempt("landlock", ["inside/landlock_abi"],
            lambda: syscall(nrs["landlock_create_ruleset"], None, 0, 1))
    attempt("personality", ["inside/personality"],
            lambda: syscall(nrs["personality"], 0x0040000))  # ADDR_NO_RANDOMIZE
    # The key and name the probe looks up (probe.py, _SnapcellInside.IPC_KEY and MQ_NAME).
    attempt("sysv shared memory", ["inside/sysv_ipc/shmget"],
            lambda: syscall(nrs["shmget"], 0x5CE11A7E, 4096, 0o1600))  # IPC_CREAT
    attempt("posix message queue", ["inside/mq_open"],
            lambda: syscall(nrs["mq_open"], b"snapcell-planted", 0o100 | 2, 0o600, None))
    attempt("namespace", ["outside/namespaces"], lambda: syscall(nrs["unshare"], 0x20000))
    refused["keyrings"] = "not attempted: keyctl, add_key and request_key kill the cell"

    # Python-level state, as the project's attack tests plant it.
    keep.append(base64.b64encode)
    attempt("module attribute", ["inside/module_attrs/base64"],
            lambda: setattr(base64, "b64encode", lambda *a, **k: b""))
    attempt("builtins", [["inside/builtins", "planted"]], lambda: setattr(builtins, "planted", 1))
    attempt("sys.modules", [["inside/sys_modules", "\"planted\""]],
            lambda: sys.modules.__setitem__("planted", types.ModuleType("planted")))
    attempt("sys.path", [["inside/sys/path", "/planted"]], lambda: sys.path.append("/planted"))

    class Finder:
        @staticmethod
        def find_spec(*args):
            return None

    attempt("meta path", ["inside/sys/meta_path"], lambda: sys.meta_path.append(Finder()))
    attempt("path hook", ["inside/sys/path_hooks"],
            lambda: sys.path_hooks.insert(0, lambda path: None))
    attempt("excepthook", ["inside/sys/excepthook"],
            lambda: setattr(sys, "excepthook", lambda *a: None))
    attempt("unraisablehook", ["inside/sys/unraisablehook"],
            lambda: setattr(sys, "unraisablehook", lambda *a: None))
    attempt("recursion limit", ["inside/sys/recursionlimit"],
            lambda: sys.setrecursionlimit(4321))
    attempt("switch interval", ["inside/sys/switchinterval"],
            lambda: sys.setswitchinterval(0.0123))
    if hasattr(sys, "set_int_max_str_digits"):
        attempt("int digits", ["inside/sys/int_max_str_digits"],
                lambda: sys.set_int_max_str_digits(5432))
    attempt("asyncgen hooks", ["inside/sys/asyncgen_hooks"],
            lambda: sys.set_asyncgen_hooks(firstiter=lambda agen: None))
    attempt("coroutine tracking", ["inside/sys/coroutine_origin_tracking_depth"],
            lambda: sys.set_coroutine_origin_tracking_depth(3))
    attempt("threading trace", ["inside/sys/threading_trace"],
            lambda: threading.settrace(lambda *a: None))
    if hasattr(sys, "monitoring"):
        attempt("monitoring tool", ["inside/sys/monitoring_tools"],
                lambda: sys.monitoring.use_tool_id(4, "planted"))
    attempt("atexit", ["inside/python_hooks/atexit_callbacks"],
            lambda: atexit.register(lambda: None))
    attempt("gc threshold", ["inside/python_hooks/gc_threshold"],
            lambda: gc.set_threshold(1234, 5, 6))
    attempt("gc callback", ["inside/python_hooks/gc_callbacks"],
            lambda: gc.callbacks.append(lambda *a: None))
    attempt("warnings", ["inside/python_hooks/warnings_filters"],
            lambda: warnings.simplefilter("ignore"))
    attempt("random state", ["inside/per_run/random"], lambda: random.seed(1234))
    attempt("globals", [["inside/main_globals", "planted_global"]],
            lambda: sys.modules["__main__"].__dict__.__setitem__("planted_global", 1))
    return {"changed": changed, "changed_in_run": in_run, "refused": refused}


planted_keep = []
print(__import__("json").dumps(_snapcell_change(), sort_keys=True))
del _snapcell_change
