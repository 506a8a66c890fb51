"""The operating-system wall around a code plan: namespaces, no capabilities, no file system, rlimits and a
seccomp allow list. Used by sandbox/child.py only, inside the sandbox's own processes; imports nothing from
the project, so the child can load it without Django.

The order matters and is the same on the cold and the warm path:

1. `enter_namespaces()` in the process that will become the parent of the run: drop to nobody (65534) in
   the host's user namespace, then unshare a new user namespace (nobody maps to nobody, nothing else is
   mapped) together with new PID, mount, IPC, UTS, network and cgroup namespaces.
2. fork: the child is PID 1 of the new PID namespace; when it dies the kernel kills everything in it.
3. `seal()` in that child: an empty read-only tmpfs becomes the root (the host's tree is detached), every
   capability set is emptied and locked, NO_NEW_PRIVS, rlimits, every descriptor but the pipes closed,
   and last the seccomp allow list.

Any refusal raises `Refused`; the caller reports it and runs nothing (never a silent downgrade).
"""

import ctypes
import errno
import os
import resource

NOBODY = 65534
M_ARENA_MAX, THREAD_STACK_BYTES = -8, 512 * 1024

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_THREAD = 0x10000000, 0x20000000, 0x40000000, 0x00010000
NAMESPACES = {
    "user": CLONE_NEWUSER,
    "pid": CLONE_NEWPID,
    "mount": CLONE_NEWNS,
    "ipc": CLONE_NEWIPC,
    "uts": CLONE_NEWUTS,
    "network": CLONE_NEWNET,
    "cgroup": CLONE_NEWCGROUP,
}

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 1 << 14, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_SECUREBITS = 1, 4, 24, 28
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
PR_GET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, PR_SET_CHILD_SUBREAPER = 39, 22, 2, 36
# Every securebit except KEEP_CAPS, each with its lock: uid 0 gets no capabilities back, ever.
SECUREBITS_LOCKED_DOWN = 0xEF
LINUX_CAPABILITY_VERSION_3 = 0x20080522
SYS_PIVOT_ROOT, SYS_CAPSET, SYS_CAPGET = 155, 126, 125


class Refused(Exception):
    """The kernel refused a step of the wall; code must not run."""


_libc = None


def libc():
    global _libc  # noqa: PLW0603 (one handle per process, opened on first use)
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc


def _check(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise Refused(f"{what} was refused: {errno.errorcode.get(number, number)} ({os.strerror(number)})")


def _write(path: str, text: str) -> None:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(descriptor, text.encode())
        finally:
            os.close(descriptor)
    except OSError as error:
        raise Refused(f"writing {path} was refused: {error.strerror}") from error


def enter_namespaces() -> None:
    """Become nobody and move into fresh namespaces; the next fork is PID 1 of the new PID namespace."""
    outside_uid, outside_gid = os.geteuid(), os.getegid()
    if outside_uid == 0:
        # Nobody outside too: whatever leaks out of the namespaces acts as an unprivileged user.
        try:
            os.setgroups([])
            os.setresgid(NOBODY, NOBODY, NOBODY)
            os.setresuid(NOBODY, NOBODY, NOBODY)
        except OSError as error:
            raise Refused(f"dropping to the unprivileged user was refused: {error.strerror}") from error
        outside_uid = outside_gid = NOBODY
    # A credential change makes /proc/self root-owned; the maps below are written by this process itself.
    _check(libc().prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "PR_SET_DUMPABLE")
    flags = 0
    for flag in NAMESPACES.values():
        flags |= flag
    if libc().unshare(flags) != 0:
        number = ctypes.get_errno()
        refused = ["user"] if not _one_namespace_allowed(0) else []
        refused = refused or [name for name, flag in NAMESPACES.items() if name != "user" and not _one_namespace_allowed(flag)]
        detail = f" (refused: {', '.join(refused)})" if refused else ""
        raise Refused(f"the kernel refused new namespaces: {errno.errorcode.get(number, number)}{detail}")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{NOBODY} {outside_uid} 1")
    _write("/proc/self/gid_map", f"{NOBODY} {outside_gid} 1")


def _one_namespace_allowed(flag: int) -> bool:
    """Which namespace the kernel refuses, for the error message (run in a throwaway fork)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if libc().unshare(CLONE_NEWUSER | flag) == 0 else 1)
    return os.waitpid(pid, 0)[1] == 0


def die_with_parent(signal_number: int) -> None:
    _check(libc().prctl(PR_SET_PDEATHSIG, signal_number, 0, 0, 0), "PR_SET_PDEATHSIG")


def become_subreaper() -> None:
    _check(libc().prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")


def empty_root() -> None:
    """Replace the file system with an empty, read-only tmpfs and detach the host's tree."""
    c = libc()
    _check(c.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making mounts private")
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    # /tmp is only the mount point for the new root; nothing of the host's /tmp is visible afterwards.
    _check(c.mount(b"tmpfs", b"/tmp", b"tmpfs", flags, b"size=4k,nr_inodes=2,mode=0555"), "mounting the empty root")
    os.chdir("/tmp")  # noqa: S108 (a mount point in our own mount namespace, see above)
    _check(c.syscall(SYS_PIVOT_ROOT, b".", b"."), "pivot_root")
    _check(c.umount2(b".", MNT_DETACH), "detaching the host file system")
    os.chdir("/")


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> None:
    """Empty the bounding, ambient, inheritable, permitted and effective sets; lock the securebits."""
    c = libc()
    for capability in range(64):
        if c.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:  # past the kernel's last capability
                break
            _check(1, f"dropping capability {capability} from the bounding set")
    _check(c.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    _check(c.prctl(PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN, 0, 0, 0), "locking the securebits")
    header, data = CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (CapData * 2)()
    _check(c.syscall(SYS_CAPSET, ctypes.byref(header), data), "capset")
    _check(c.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    _check(c.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "PR_SET_DUMPABLE")


def set_limits(limits: dict) -> None:
    # Under an address-space limit every thread would otherwise reserve a 64 MB malloc arena and an 8 MB
    # stack: one arena and small stacks let a plan use threads within its memory.
    libc().mallopt(M_ARENA_MAX, 1)
    import _thread

    _thread.stack_size(THREAD_STACK_BYTES)
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
    # Counted per user namespace and uid, so this caps the run's own threads (fork is refused anyway).
    resource.setrlimit(resource.RLIMIT_NPROC, (32, 32))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))


def keep_only_pipes(result_descriptor: int) -> None:
    """fd 1 becomes the result pipe; fds 0 and 2 become pipes whose other end is closed; all else closes."""
    os.dup2(result_descriptor, 1)
    for target in (0, 2):
        read_end, write_end = os.pipe()
        os.dup2(read_end if target == 0 else write_end, target)
        os.close(read_end)
        os.close(write_end)
    os.closerange(3, 1 << 20)


def facts() -> dict:
    """What the kernel says about this process, reported in the result's `isolation`."""
    c = libc()
    header, data = CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (CapData * 2)()
    capabilities_empty = c.syscall(SYS_CAPGET, ctypes.byref(header), data) == 0 and not any(
        part.effective or part.permitted or part.inheritable for part in data
    )
    return {
        "pid": os.getpid(),
        "uid": os.getuid(),
        "gid": os.getgid(),
        "capabilities_empty": capabilities_empty,
        "no_new_privs": c.prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1,
    }


# ---------------------------------------------------------------------------------------------------------
# seccomp: an allow list. Everything not named here answers EPERM.

# x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl) of what CPython, glibc and the TinyDB helpers
# use once the code runs: memory, pipes, time, signals of its own, threads, randomness, exit.
ALLOWED = {
    "read": 0, "write": 1, "close": 3, "lseek": 8, "munmap": 11, "brk": 12, "rt_sigaction": 13,
    "rt_sigprocmask": 14, "rt_sigreturn": 15, "pread64": 17, "readv": 19, "writev": 20, "sched_yield": 24,
    "mremap": 25, "madvise": 28, "nanosleep": 35, "getpid": 39, "exit": 60, "gettimeofday": 96, "getrusage": 98,
    "getuid": 102, "getgid": 104, "geteuid": 107, "getegid": 108, "getppid": 110, "sigaltstack": 131, "gettid": 186,
    "time": 201, "futex": 202, "sched_getaffinity": 204, "clock_gettime": 228, "clock_getres": 229,
    "clock_nanosleep": 230, "exit_group": 231, "restart_syscall": 219, "set_robust_list": 273, "getrandom": 318,
    "rseq": 334,
}  # fmt: skip
# Allowed only with the arguments shown in bpf_program().
SYS_MMAP, SYS_MPROTECT, SYS_IOCTL, SYS_CLONE, SYS_CLONE3, SYS_FCNTL = 9, 10, 16, 56, 435, 72
PROT_EXEC = 4
IOCTL_ALLOWED = (0x5401, 0x541B)  # TCGETS (isatty), FIONREAD; only on fds 0-2, the pipes
FCNTL_ALLOWED = (1, 3)  # F_GETFD, F_GETFL

AUDIT_ARCH_X86_64 = 0xC000003E
RET_ALLOW, RET_KILL_PROCESS = 0x7FFF0000, 0x80000000
RET_EPERM, RET_ENOSYS = 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
NR, ARCH = 0, 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index  # seccomp_data.args[index], low 32 bits (little-endian)


def _arg_high(index: int) -> int:
    return 20 + 8 * index


def bpf_program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions."""
    program = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ, 1, 0, AUDIT_ARCH_X86_64),
        (RET, 0, 0, RET_KILL_PROCESS),  # another architecture's numbers mean other calls: never
        (LD_W_ABS, 0, 0, NR),
        (JGE, 0, 1, 0x40000000),
        (RET, 0, 0, RET_KILL_PROCESS),  # the x32 ABI
    ]
    for number in sorted(ALLOWED.values()):
        program += [(JEQ, 0, 1, number), (RET, 0, 0, RET_ALLOW)]
    # glibc tries clone3 first and falls back to clone when it hears ENOSYS.
    program += [(JEQ, 0, 1, SYS_CLONE3), (RET, 0, 0, RET_ENOSYS)]
    # clone only as a thread: CLONE_THREAD set (the kernel then insists on a shared address space).
    program += [(JEQ, 0, 4, SYS_CLONE), (LD_W_ABS, 0, 0, _arg_low(0)), (JSET, 0, 1, CLONE_THREAD), (RET, 0, 0, RET_ALLOW)]
    program += [(RET, 0, 0, RET_EPERM)]
    # mmap and mprotect: never executable memory (the interpreter does not make any after start-up).
    for number in (SYS_MMAP, SYS_MPROTECT):
        program += [(JEQ, 0, 4, number), (LD_W_ABS, 0, 0, _arg_low(2)), (JSET, 1, 0, PROT_EXEC), (RET, 0, 0, RET_ALLOW)]
        program += [(RET, 0, 0, RET_EPERM)]
    # ioctl: only TCGETS and FIONREAD on fds 0-2, which are pipes.
    program += _small_fd_with_command(SYS_IOCTL, IOCTL_ALLOWED)
    program += _small_fd_with_command(SYS_FCNTL, FCNTL_ALLOWED)
    program.append((RET, 0, 0, RET_EPERM))
    return program


def _small_fd_with_command(number: int, commands: tuple[int, ...]) -> list[tuple[int, int, int, int]]:
    """`number` allowed only on fds 0-2 (the high word zero too) and only with one of `commands`."""
    refuse = 5 + 2 * len(commands)  # index of the closing RET EPERM within the body
    body = [(LD_W_ABS, 0, 0, _arg_high(0)), (JEQ, 0, refuse - 2, 0)]
    body += [(LD_W_ABS, 0, 0, _arg_low(0)), (JGE, refuse - 4, 0, 3)]
    body += [(LD_W_ABS, 0, 0, _arg_low(1))]
    for command in commands:
        body += [(JEQ, 0, 1, command), (RET, 0, 0, RET_ALLOW)]
    body += [(RET, 0, 0, RET_EPERM)]
    return [(JEQ, 0, len(body), number), *body]


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def load_seccomp(libraries: dict) -> None:
    if os.uname().machine != "x86_64":
        _load_with_libseccomp(libraries)
        return
    instructions = bpf_program()
    filters = (SockFilter * len(instructions))(*[SockFilter(*instruction) for instruction in instructions])
    program = SockFprog(len(instructions), filters)
    _check(libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    _check(libc().prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0), "loading the seccomp filter")


def _load_with_libseccomp(libraries: dict) -> None:
    """Other architectures: the same allow list by name through libseccomp (pyseccomp)."""
    import ctypes.util

    # find_library shells out to ldconfig (~15 ms a call); the parent already knows the answers.
    known = dict(libraries)
    original = ctypes.util.find_library
    ctypes.util.find_library = lambda name: known.get(name) or original(name)
    try:
        import pyseccomp as seccomp
    except ImportError as error:
        raise Refused("no seccomp filter can be built on this machine (pyseccomp is missing)") from error
    rules = seccomp.SyscallFilter(defaction=seccomp.ERRNO(errno.EPERM))
    for name in [*ALLOWED, "mmap", "mprotect", "clone", "ioctl", "fcntl"]:
        try:
            if name == "clone":
                rules.add_rule(seccomp.ALLOW, name, seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, CLONE_THREAD))
            elif name in {"mmap", "mprotect"}:
                rules.add_rule(seccomp.ALLOW, name, seccomp.Arg(2, seccomp.MASKED_EQ, PROT_EXEC, 0))
            elif name in {"ioctl", "fcntl"}:
                for command in IOCTL_ALLOWED if name == "ioctl" else FCNTL_ALLOWED:
                    rules.add_rule(seccomp.ALLOW, name, seccomp.Arg(0, seccomp.LE, 2), seccomp.Arg(1, seccomp.EQ, command))
            else:
                rules.add_rule(seccomp.ALLOW, name)
        except Exception:  # noqa: BLE001, S112 (a call this architecture does not have needs no rule)
            continue
    try:
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    except Exception:  # noqa: BLE001, S110 (older kernels have no clone3)
        pass
    try:
        rules.load()
    except Exception as error:  # noqa: BLE001 (whatever libseccomp raises, nothing runs)
        raise Refused(f"loading the seccomp filter was refused: {error}") from error
