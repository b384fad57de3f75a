"""A seccomp filter that denies sockets, new namespaces and a few kernel interfaces (libseccomp via ctypes).

Installed by the worker itself before it imports bpy (and before any agent code runs); a
seccomp filter can never be removed, and it is inherited by every thread and child. It
allows ``socketpair`` (the supervisor channel is already open; Python's multiprocessing
uses AF_UNIX pairs; a pair reaches nothing outside) and denies ``socket`` for every address
family, so neither the network nor abstract Unix sockets of the host are reachable. io_uring
is denied as a whole: its ``IORING_OP_SOCKET`` makes a socket without the ``socket`` call, and
its operations run in kernel threads the filter never sees. The filter holds the native ABI
only: a call through another (i386's ``int 0x80``, x32's numbers) is killed by libseccomp's
bad-architecture action, so i386's ``socketcall`` multiplexer is out of reach too.

Standard library only; also run as a script (``--probe``) by the supervisor's layer probe.
"""

import ctypes
import ctypes.util
import errno
import json
import os
import socket
import sys

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_FLTATR_CTL_NNP = 3
SCMP_FLTATR_CTL_TSYNC = 4

DENIED_SYSCALLS = (
    "socket",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "userfaultfd",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "kexec_load",
    "init_module",
    "finit_module",
    "delete_module",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    # Routes around this filter: io_uring runs its operations (IORING_OP_SOCKET, file I/O) in kernel
    # workers that seccomp does not see; pidfd_getfd copies a descriptor (a socket) out of another
    # process; the new mount API mounts without "mount".
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "pidfd_getfd",
    "fsopen",
    "fsmount",
    "fsconfig",
    "move_mount",
    "open_tree",
    # i386's socket multiplexer, where the native ABI has one (resolved to nothing on x86_64 and arm64).
    "socketcall",
)
ENOSYS_SYSCALLS = ("io_uring_setup", "io_uring_enter", "io_uring_register")
"""Answered ENOSYS, as a kernel built without io_uring does: programs that try it fall back to plain calls."""


# clone() flags that make new namespaces; a user namespace is the usual door to kernel bugs.
NAMESPACE_FLAGS = (0x00020000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x02000000)
SCMP_CMP_MASKED_EQ = 7


class ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _act_errno(code):
    return 0x00050000 | (code & 0xFFFF)


def install(export_fd: int | None = None) -> str | None:
    """Load the filter into this process; returns None, or a one-line reason it could not.

    export_fd: write the filter's BPF program to this descriptor instead of loading it (for
    ``bwrap --seccomp FD``, which loads it into the sandbox's first process before exec).
    """
    # The soname first: find_library runs ldconfig (or a compiler) in a subprocess, about 150 ms, which
    # every sandboxed bash block of a Mini-BVB scene would pay.
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError as exc:
            return f"libseccomp not loadable ({exc}); install the libseccomp2 Debian package"
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    ]
    lib.seccomp_attr_set.restype = ctypes.c_int
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_load.restype = ctypes.c_int
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        return "seccomp_init failed"
    try:
        lib.seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1)
        # TSYNC: apply to threads that already exist (Python may have started some).
        lib.seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)
        for syscall in DENIED_SYSCALLS:
            number = lib.seccomp_syscall_resolve_name(syscall.encode())
            if number < 0:
                continue
            code = errno.EPERM
            if syscall == "socket":
                code = errno.EAFNOSUPPORT
            elif syscall in ENOSYS_SYSCALLS:
                code = errno.ENOSYS
            rc = lib.seccomp_rule_add_array(ctx, _act_errno(code), number, 0, None)
            if rc < 0:
                return f"seccomp_rule_add({syscall}) failed: {os.strerror(-rc)}"
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for flag in NAMESPACE_FLAGS:
            cmp = ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag)
            rc = lib.seccomp_rule_add_array(ctx, _act_errno(errno.EPERM), clone, 1, ctypes.byref(cmp))
            if rc < 0:
                return f"seccomp_rule_add(clone) failed: {os.strerror(-rc)}"
        # clone3 passes its flags in memory, out of a filter's reach: ENOSYS makes libc fall back to clone.
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0:
            lib.seccomp_rule_add_array(ctx, _act_errno(errno.ENOSYS), clone3, 0, None)
        if export_fd is not None:
            rc = lib.seccomp_export_bpf(ctx, export_fd)
            if rc < 0:
                return f"seccomp_export_bpf failed: {os.strerror(-rc)}"
            return None
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            return f"seccomp_load failed: {os.strerror(-rc)}"
    finally:
        lib.seccomp_release(ctx)
    return None


def capability_bounding_set() -> int | None:
    """This process's capability bounding set (CapBnd of /proc/self/status), or None where unreadable."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("CapBnd:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return None


def probe() -> None:
    """What the supervisor's layer probe runs inside the candidate sandbox."""
    report: dict[str, object] = {"uid": os.getuid(), "euid": os.geteuid(), "seccomp_error": None, "socket_blocked": False,
              "cap_bnd": capability_bounding_set()}  # fmt: skip
    if "--seccomp" in sys.argv:
        report["seccomp_error"] = install()
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        except OSError:
            report["socket_blocked"] = True
    print(json.dumps(report), flush=True)


if __name__ == "__main__" and "--probe" in sys.argv:
    probe()
