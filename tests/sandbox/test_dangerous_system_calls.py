"""Every dangerous system call fails inside the sandbox, called directly through ctypes with the language
policy switched off, so only the operating system stands in the way.

The list is this file's own, compiled from the kernel's x86_64 table (arch/x86/entry/syscalls/
syscall_64.tbl) by what a call could do to the world outside a run: control or signal processes, read
other processes' memory or descriptors, change mounts, namespaces, keys, credentials, the clock or the
kernel, make sockets, open or change files, create executable memory. It is not imported from the sandbox.
Each call is made with arguments that would work, or fail differently, without the wall: the seccomp allow
list answers EPERM (clone3: ENOSYS, so glibc falls back to clone, which the filter then judges).
"""

import errno
import json
import os
import re
from pathlib import Path

import pytest

from sandbox.runner import run_code

NUMBERS = {
    "read": 0, "open": 2, "stat": 4, "mmap": 9, "mprotect": 10, "ioctl": 16, "access": 21, "shmget": 29, "shmat": 30,
    "shmctl": 31, "socket": 41, "connect": 42, "sendto": 44, "recvfrom": 45, "sendmsg": 46, "bind": 49, "listen": 50,
    "socketpair": 53, "clone": 56, "fork": 57, "vfork": 58, "execve": 59, "kill": 62, "semget": 64, "semop": 65,
    "semctl": 66, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "truncate": 76, "chdir": 80, "fchdir": 81,
    "rename": 82, "mkdir": 83, "link": 86, "unlink": 87, "symlink": 88, "readlink": 89, "chmod": 90, "chown": 92,
    "ptrace": 101, "syslog": 103, "setuid": 105, "setgid": 106, "setgroups": 116, "setresuid": 117, "capset": 126,
    "rt_sigqueueinfo": 129, "mknod": 133, "personality": 135, "setpriority": 141, "vhangup": 153, "pivot_root": 155,
    "prctl": 157, "arch_prctl": 158, "adjtimex": 159, "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165,
    "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171,
    "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179, "tkill": 200,
    "sched_setaffinity": 203, "getdents64": 217, "semtimedop": 220, "clock_settime": 227, "tgkill": 234,
    "mbind": 237, "set_mempolicy": 238, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "migrate_pages": 256, "openat": 257, "newfstatat": 262, "unshare": 272, "move_pages": 279, "accept4": 288,
    "inotify_init1": 294, "rt_tgsigqueueinfo": 297, "perf_event_open": 298, "fanotify_init": 300, "prlimit64": 302,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "seccomp": 317, "memfd_create": 319,
    "kexec_file_load": 320, "bpf": 321, "execveat": 322, "userfaultfd": 323, "pkey_mprotect": 329, "statx": 332,
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "pidfd_open": 434, "clone3": 435, "openat2": 437, "pidfd_getfd": 438, "process_madvise": 440,
    "mount_setattr": 442, "landlock_create_ruleset": 444, "memfd_secret": 447, "process_mrelease": 448,
}  # fmt: skip

SIGCHLD, SIGKILL, AT_FDCWD, IPC_PRIVATE_CREATE = 17, 9, -100, 0o1600
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
# (what it would do, system call, arguments). VICTIM, PARENT and SECRET_PATH are filled in by the bait
# fixture; BUF is a zeroed 4 KiB buffer.
DANGEROUS = [
    ("fork a process", "fork", ()),
    ("vfork a process", "vfork", ()),
    ("clone without CLONE_THREAD, which is fork", "clone", (SIGCHLD, 0, 0, 0, 0)),
    ("clone into new namespaces", "clone", (CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0)),
    ("clone3, any flags", "clone3", ("BUF", 88)),
    ("execute a program", "execve", ("/bin/sh", 0, 0)),
    ("execute a program relative to a directory", "execveat", (AT_FDCWD, "/bin/sh", 0, 0, 0)),
    ("kill another process", "kill", ("VICTIM", SIGKILL)),
    ("kill every process it can", "kill", (-1, SIGKILL)),
    ("kill the parent", "kill", ("PARENT", SIGKILL)),
    ("tkill another thread", "tkill", ("VICTIM", SIGKILL)),
    ("tgkill another process", "tgkill", ("VICTIM", "VICTIM", SIGKILL)),
    ("queue a signal to another process", "rt_sigqueueinfo", ("VICTIM", SIGKILL, "BUF")),
    ("queue a signal to another thread", "rt_tgsigqueueinfo", ("VICTIM", "VICTIM", SIGKILL, "BUF")),
    ("open a pidfd of another process", "pidfd_open", ("PARENT", 0)),
    ("copy another process's descriptor", "pidfd_getfd", (0, 3, 0)),
    ("signal through a pidfd", "pidfd_send_signal", (0, SIGKILL, 0, 0)),
    ("ptrace attach to another process", "ptrace", (16, "VICTIM", 0, 0)),
    ("ptrace seize another process", "ptrace", (0x4206, "PARENT", 0, 0)),
    ("ask to be traced", "ptrace", (0, 0, 0, 0)),
    ("read another process's memory", "process_vm_readv", ("PARENT", "BUF", 1, "BUF", 1, 0)),
    ("write another process's memory", "process_vm_writev", ("PARENT", "BUF", 1, "BUF", 1, 0)),
    ("compare kernel objects of another process", "kcmp", ("PARENT", 1, 0, 0, 0)),
    ("advise another process's memory", "process_madvise", (0, "BUF", 1, 8, 0)),
    ("reap another process's memory", "process_mrelease", (0, 0)),
    ("mount a file system", "mount", ("none", "/", "tmpfs", 0, 0)),
    ("unmount the root", "umount2", ("/", 2)),
    ("pivot the root", "pivot_root", ("/", "/")),
    ("chroot", "chroot", ("/",)),
    ("open a file system context", "fsopen", ("tmpfs", 0)),
    ("configure a file system context", "fsconfig", (0, 0, 0, 0, 0)),
    ("mount a file system context", "fsmount", (0, 0, 0)),
    ("pick a mounted file system", "fspick", (AT_FDCWD, "/", 0)),
    ("clone a mount tree", "open_tree", (AT_FDCWD, "/", 1)),
    ("move a mount", "move_mount", (AT_FDCWD, "/", AT_FDCWD, "/", 0)),
    ("change mount attributes", "mount_setattr", (AT_FDCWD, "/", 0, "BUF", 32)),
    ("new user namespace", "unshare", (CLONE_NEWUSER,)),
    ("new network namespace", "unshare", (CLONE_NEWNET,)),
    ("join a namespace", "setns", (0, 0)),
    ("read a keyring", "keyctl", (0, -3, 0, 0, 0)),
    ("add a key", "add_key", ("user", "stolen", "BUF", 4, -3)),
    ("request a key", "request_key", ("user", "stolen", 0, 0)),
    ("load a BPF program", "bpf", (5, "BUF", 72)),
    ("open a perf event", "perf_event_open", ("BUF", 0, -1, -1, 0)),
    ("set up io_uring", "io_uring_setup", (8, "BUF")),
    ("enter io_uring", "io_uring_enter", (0, 1, 0, 0, 0, 0)),
    ("register with io_uring", "io_uring_register", (0, 0, 0, 0)),
    ("create a userfaultfd", "userfaultfd", (0,)),
    ("SysV shared memory: create", "shmget", (0, 4096, IPC_PRIVATE_CREATE)),
    ("SysV shared memory: attach", "shmat", (0, 0, 0)),
    ("SysV shared memory: control", "shmctl", (0, 2, "BUF")),
    ("SysV message queue: create", "msgget", (0, IPC_PRIVATE_CREATE)),
    ("SysV message queue: send", "msgsnd", (0, "BUF", 8, 0o4000)),
    ("SysV message queue: receive", "msgrcv", (0, "BUF", 8, 0, 0o4000)),
    ("SysV message queue: control", "msgctl", (0, 2, "BUF")),
    ("SysV semaphore: create", "semget", (0, 1, IPC_PRIVATE_CREATE)),
    ("SysV semaphore: operate", "semop", (0, "BUF", 1)),
    ("SysV semaphore: timed operate", "semtimedop", (0, "BUF", 1, 0)),
    ("SysV semaphore: control", "semctl", (0, 0, 2, 0)),
    ("an IPv4 socket", "socket", (2, 1, 0)),
    ("an IPv6 socket", "socket", (10, 1, 0)),
    ("a Unix socket", "socket", (1, 1, 0)),
    ("a netlink socket", "socket", (16, 3, 0)),
    ("a packet socket", "socket", (17, 3, 0)),
    ("a vsock socket", "socket", (40, 1, 0)),
    ("a socket pair", "socketpair", (1, 1, 0, "BUF")),
    ("connect a descriptor", "connect", (1, "BUF", 16)),
    ("bind a descriptor", "bind", (1, "BUF", 16)),
    ("listen on a descriptor", "listen", (1, 1)),
    ("accept on a descriptor", "accept4", (0, 0, 0, 0)),
    ("send a datagram", "sendto", (1, "BUF", 1, 0, "BUF", 16)),
    ("send a message with descriptors", "sendmsg", (1, "BUF", 0)),
    ("receive from a descriptor", "recvfrom", (0, "BUF", 1, 0, 0, 0)),
    ("open a file", "open", ("/etc/passwd", 0, 0)),
    ("open a file at a directory", "openat", (AT_FDCWD, "/etc/passwd", 0, 0)),
    ("create a file", "openat", (AT_FDCWD, "/tmp/countersign-created", 0o101, 0o644)),
    ("open a file with openat2", "openat2", (AT_FDCWD, "/etc/passwd", "BUF", 24)),
    ("open by file handle", "open_by_handle_at", (AT_FDCWD, "BUF", 0)),
    ("get a file handle", "name_to_handle_at", (AT_FDCWD, "/", "BUF", "BUF", 0)),
    ("open the secret", "open", ("SECRET_PATH", 0, 0)),
    ("stat a path", "stat", ("/", "BUF")),
    ("stat a path at a directory", "newfstatat", (AT_FDCWD, "/", "BUF", 0)),
    ("statx a path", "statx", (AT_FDCWD, "/", 0, 0xFFF, "BUF")),
    ("check access to a path", "access", ("/etc/passwd", 0)),
    ("read a symbolic link", "readlink", ("/proc/self/exe", "BUF", 64)),
    ("list a directory", "getdents64", (0, "BUF", 64)),
    ("change directory", "chdir", ("/",)),
    ("change directory by descriptor", "fchdir", (0,)),
    ("make a device node", "mknod", ("/tmp/countersign-node", 0o20644, 0x0103)),
    ("make a directory", "mkdir", ("/tmp/countersign-dir", 0o755)),
    ("make a symbolic link", "symlink", ("/etc/passwd", "/tmp/countersign-link")),
    ("make a hard link", "link", ("/etc/passwd", "/tmp/countersign-link")),
    ("remove a file", "unlink", ("/tmp/countersign-created",)),
    ("rename a file", "rename", ("/tmp/a", "/tmp/b")),
    ("change a mode", "chmod", ("/", 0o777)),
    ("change an owner", "chown", ("/", 0, 0)),
    ("truncate a file", "truncate", ("/etc/passwd", 0)),
    ("create anonymous file memory", "memfd_create", ("stolen", 0)),
    ("create secret memory", "memfd_secret", (0,)),
    ("watch files", "inotify_init1", (0,)),
    ("watch the file system", "fanotify_init", (0, 0)),
    ("read another process's limits", "prlimit64", ("PARENT", 7, 0, "BUF")),
    ("raise its own limits", "prlimit64", (0, 7, "BUF", 0)),
    ("renice another process", "setpriority", (0, "VICTIM", 19)),
    ("pin another process", "sched_setaffinity", ("VICTIM", 8, "BUF")),
    ("move another process's pages", "move_pages", ("PARENT", 0, 0, 0, 0, 0)),
    ("migrate another process's pages", "migrate_pages", ("PARENT", 64, "BUF", "BUF")),
    ("set a memory policy", "set_mempolicy", (0, 0, 0)),
    ("bind memory", "mbind", (0, 0, 0, 0, 0, 0)),
    ("map executable memory", "mmap", (0, 4096, 7, 0x22, -1, 0)),
    ("make memory executable", "mprotect", ("BUF", 4096, 7)),
    ("make memory executable with a key", "pkey_mprotect", ("BUF", 4096, 7, 0)),
    ("push characters into a terminal", "ioctl", (0, 0x5412, "BUF")),
    ("ioctl on a descriptor beyond the pipes", "ioctl", (5, 0x5401, "BUF")),
    ("reboot", "reboot", (0xFEE1DEAD, 672274793, 0x4321FEDC, 0)),
    ("load a kernel module", "init_module", ("BUF", 16, "")),
    ("load a kernel module from a file", "finit_module", (0, "", 0)),
    ("unload a kernel module", "delete_module", ("loop", 0)),
    ("load a new kernel", "kexec_load", (0, 0, 0, 0)),
    ("load a new kernel from a file", "kexec_file_load", (0, 0, 0, 0, 0)),
    ("turn on swap", "swapon", ("/tmp/swap", 0)),
    ("turn off swap", "swapoff", ("/tmp/swap",)),
    ("turn on process accounting", "acct", ("/tmp/acct",)),
    ("set the time of day", "settimeofday", ("BUF", 0)),
    ("set a clock", "clock_settime", (0, "BUF")),
    ("adjust the clock", "adjtimex", ("BUF",)),
    ("set the host name", "sethostname", ("x", 1)),
    ("set the domain name", "setdomainname", ("x", 1)),
    ("raise the I/O privilege level", "iopl", (3,)),
    ("get I/O ports", "ioperm", (0, 1024, 1)),
    ("control disk quotas", "quotactl", (0, 0, 0, 0)),
    ("read the kernel log", "syslog", (3, "BUF", 64)),
    ("change the execution domain", "personality", (0x0040000,)),
    ("hang up the terminal", "vhangup", ()),
    ("replace the seccomp filter", "seccomp", (1, 0, "BUF")),
    ("change process attributes", "prctl", (4, 1, 0, 0, 0)),
    ("change the architecture state", "arch_prctl", (0x1002, 0)),
    ("create a landlock ruleset", "landlock_create_ruleset", (0, 0, 1)),
    ("become root", "setuid", (0,)),
    ("join the root group", "setgid", (0,)),
    ("set all user ids", "setresuid", (0, 0, 0)),
    ("set supplementary groups", "setgroups", (0, 0)),
    ("regain capabilities", "capset", ("BUF", "BUF")),
]

CALL = """
import ctypes
import json

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buffer = ctypes.create_string_buffer(4096)
pointer = ctypes.cast(buffer, ctypes.c_void_p).value


def argument(value):
    if value == "BUF":
        return ctypes.c_void_p(pointer)
    if isinstance(value, str):
        return ctypes.c_char_p(value.encode())
    return ctypes.c_long(value)


ctypes.set_errno(0)
returned = libc.syscall(ctypes.c_long(NUMBER), *[argument(value) for value in ARGUMENTS])
answer_text = json.dumps([returned, ctypes.get_errno()])
"""


def test_the_list_covers_at_least_60_different_system_calls():
    assert len({name for _, name, _ in DANGEROUS}) >= 60


def test_the_numbers_are_the_kernels():
    header = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
    if not header.exists():
        pytest.skip("no kernel headers to compare against")
    table = {name: int(number) for name, number in re.findall(r"#define __NR_(\w+) (\d+)", header.read_text())}
    assert {name: number for name, number in NUMBERS.items() if name in table} == {name: table[name] for name in NUMBERS if name in table}
    assert len([name for name in NUMBERS if name in table]) >= len(NUMBERS) - 3  # very new calls may be missing


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the numbers are x86_64's")
@pytest.mark.parametrize("what, name, arguments", DANGEROUS, ids=[what for what, _, _ in DANGEROUS])
def test_a_dangerous_system_call_fails_inside_the_sandbox(what, name, arguments, bait):
    resolved = [bait.fill(value) if isinstance(value, str) and value != "BUF" else value for value in arguments]
    resolved = [int(value) if isinstance(value, str) and value.isdigit() else value for value in resolved]
    code = CALL.replace("NUMBER", str(NUMBERS[name])).replace("ARGUMENTS", repr(resolved))
    result = run_code(code, tables={}, unsafe_disable_language_policy=True)
    assert result.status == "ok", result
    returned, error_number = json.loads(result.answer_text)
    assert returned == -1
    assert error_number == (errno.ENOSYS if name == "clone3" else errno.EPERM), os.strerror(error_number)
    assert bait.untouched(result) == []
