#!/usr/bin/env python3
"""The kernel's name rules, one call per line: trailing slashes, O_NOFOLLOW, O_DIRECTORY,
O_EXCL on symlinks, O_TMPFILE, O_PATH, AT_EMPTY_PATH, RENAME_NOREPLACE/EXCHANGE/WHITEOUT,
linkat AT_SYMLINK_FOLLOW, `.` and `..`, ENAMETOOLONG, ELOOP, openat2's RESOLVE_* flags,
directories the caller may not search, descriptors it does not have, and the errors the kernel
gives before a permission check outside the writable tree.

Run in an empty directory: `python3 names.py`. Prints `case: result` per call (`ok` or the
errno's name), then the tree it left. tests/it/fidelity_names.rs runs it bare and under guard
and compares the two outputs.
"""

import ctypes
import errno
import os
import stat
import sys

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_SYMLINK_FOLLOW = 0x400
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_SYMLINKS = 0x01, 0x02, 0x04
RESOLVE_BENEATH, RESOLVE_IN_ROOT = 0x08, 0x10
SYS_OPENAT2 = 437


def show(case, fn):
    try:
        r = fn()
    except OSError as e:
        print(f"{case}: {errno.errorcode.get(e.errno, e.errno)}")
        return None
    print(f"{case}: ok")
    return r


def check(rc):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def renameat2(a, b, flags):
    return check(libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags))


def linkat(fd, a, b, flags):
    return check(libc.linkat(fd, a.encode(), AT_FDCWD, b.encode(), flags))


class OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def openat2(dirfd, path, flags, mode, resolve):
    how = OpenHow(flags, mode, resolve)
    fd = libc.syscall(SYS_OPENAT2, dirfd, path.encode(), ctypes.byref(how), ctypes.sizeof(how))
    check(fd)
    os.close(fd)


def opened(path, flags, mode=0o644):
    os.close(os.open(path, flags, mode))


def setup():
    with open("f", "w") as f:
        f.write("file\n")
    with open("f2", "w") as f:
        f.write("second\n")
    os.mkdir("d")
    os.mkdir("e")
    open("e/inside", "w").close()
    os.symlink("f", "lf")
    os.symlink("d", "ld")
    os.symlink("nowhere", "ln")
    os.symlink("loop2", "loop1")
    os.symlink("loop1", "loop2")
    os.mkfifo("ff")


W, C, X = os.O_WRONLY, os.O_CREAT, os.O_EXCL


def main():
    setup()
    # open(2)
    show("open O_CREAT new/", lambda: opened("new/", C | W))
    show("open O_CREAT d/", lambda: opened("d/", C | W))
    show("open O_WRONLY f/", lambda: opened("f/", W))
    show("open O_WRONLY d", lambda: opened("d", W))
    show("open O_WRONLY ld/", lambda: opened("ld/", W))
    show("open O_NOFOLLOW lf", lambda: opened("lf", W | os.O_NOFOLLOW))
    show("open O_NOFOLLOW ld/", lambda: opened("ld/", W | os.O_NOFOLLOW))
    show("open O_DIRECTORY f", lambda: opened("f", W | os.O_DIRECTORY))
    show("open O_DIRECTORY d", lambda: opened("d", W | os.O_DIRECTORY))
    show("open O_EXCL lf", lambda: opened("lf", C | X | W))
    show("open O_EXCL ln", lambda: opened("ln", C | X | W))
    show("open O_CREAT ln (creates its target)", lambda: opened("ln", C | W))
    show("open O_CREAT loop1", lambda: opened("loop1", C | W))
    show("open O_RDONLY|O_TRUNC d", lambda: opened("d", os.O_RDONLY | os.O_TRUNC))
    show("open O_PATH|O_CREAT pathnew", lambda: opened("pathnew", os.O_PATH | C))
    show("open O_CREAT name too long", lambda: opened("n" * 256, C | W))
    show("open O_CREAT missing/x", lambda: opened("missing/x", C | W))
    show("open O_CREAT f/x", lambda: opened("f/x", C | W))
    tmp = show("open O_TMPFILE d", lambda: os.open("d", os.O_TMPFILE | W, 0o600))
    if tmp is not None:
        os.write(tmp, b"unnamed\n")
        show("linkat /proc/self/fd AT_SYMLINK_FOLLOW", lambda: linkat(
            AT_FDCWD, f"/proc/self/fd/{tmp}", "tmpnamed", AT_SYMLINK_FOLLOW))
        show("linkat AT_EMPTY_PATH", lambda: linkat(tmp, "", "emptylinked", AT_EMPTY_PATH))
        show("fchownat AT_EMPTY_PATH", lambda: check(
            libc.fchownat(tmp, b"", -1, -1, AT_EMPTY_PATH)))
        os.close(tmp)
    show("open O_TMPFILE d/", lambda: opened("d/", os.O_TMPFILE | W, 0o600))
    show("open O_TMPFILE f", lambda: opened("f", os.O_TMPFILE | W, 0o600))
    show("open O_TMPFILE missing", lambda: opened("missing", os.O_TMPFILE | W, 0o600))
    # openat2(2) with resolve flags
    d = os.open("d", os.O_PATH | os.O_DIRECTORY)
    show("openat2 BENEATH ../f", lambda: openat2(d, "../f", W, 0, RESOLVE_BENEATH))
    show("openat2 BENEATH inner", lambda: openat2(d, "inner", W | C, 0o644, RESOLVE_BENEATH))
    show("openat2 IN_ROOT /rooted", lambda: openat2(d, "/rooted", W | C, 0o644, RESOLVE_IN_ROOT))
    show("openat2 NO_SYMLINKS lf", lambda: openat2(AT_FDCWD, "lf", W, 0, RESOLVE_NO_SYMLINKS))
    show("openat2 NO_SYMLINKS f", lambda: openat2(AT_FDCWD, "f", W, 0, RESOLVE_NO_SYMLINKS))
    show("openat2 NO_MAGICLINKS /proc/self/cwd/f", lambda: openat2(
        AT_FDCWD, "/proc/self/cwd/f", W, 0, RESOLVE_NO_MAGICLINKS))
    show("openat2 NO_XDEV /proc/self/cwd", lambda: openat2(
        AT_FDCWD, "/proc/self/cwd", os.O_RDONLY | os.O_TRUNC, 0, RESOLVE_NO_XDEV))
    os.close(d)
    # mkdir(2)
    show("mkdir newdir/", lambda: os.mkdir("newdir/"))
    show("mkdir f/", lambda: os.mkdir("f/"))
    show("mkdir d/.", lambda: os.mkdir("d/."))
    show("mkdir d/..", lambda: os.mkdir("d/.."))
    show("mkdir ln", lambda: os.mkdir("ln"))
    show("mkdir /usr", lambda: os.mkdir("/usr"))
    show("mkdir name too long", lambda: os.mkdir("m" * 256))
    # unlink(2), rmdir(2)
    show("unlink f/", lambda: os.unlink("f/"))
    show("unlink d/", lambda: os.unlink("d/"))
    show("unlink missing/", lambda: os.unlink("missing/"))
    show("unlink d", lambda: os.unlink("d"))
    show("unlink d/.", lambda: os.unlink("d/."))
    show("unlink /usr/no-such-file", lambda: os.unlink("/usr/guard-no-such-file"))
    os.mkdir("d2")
    show("rmdir d2/", lambda: os.rmdir("d2/"))
    show("rmdir ld/", lambda: os.rmdir("ld/"))
    show("rmdir f/", lambda: os.rmdir("f/"))
    show("rmdir d/.", lambda: os.rmdir("d/."))
    show("rmdir d/..", lambda: os.rmdir("d/.."))
    show("rmdir /usr/no-such-dir", lambda: os.rmdir("/usr/guard-no-such-dir"))
    # rename(2), renameat2(2)
    show("rename f/ g", lambda: os.rename("f/", "g"))
    show("rename f g/", lambda: os.rename("f", "g/"))
    os.mkdir("d3")
    show("rename d3/ d4/", lambda: os.rename("d3/", "d4/"))
    show("rename e/.. x", lambda: os.rename("e/..", "x"))
    show("rename lf/ x", lambda: os.rename("lf/", "x"))
    show("renameat2 NOREPLACE f f2", lambda: renameat2("f", "f2", RENAME_NOREPLACE))
    show("renameat2 EXCHANGE f missing", lambda: renameat2("f", "missing", RENAME_EXCHANGE))
    show("renameat2 EXCHANGE f f2", lambda: renameat2("f", "f2", RENAME_EXCHANGE))
    show("renameat2 EXCHANGE|NOREPLACE", lambda: renameat2("f", "f2", RENAME_EXCHANGE | RENAME_NOREPLACE))
    show("renameat2 WHITEOUT", lambda: renameat2("f2", "f3", RENAME_WHITEOUT))
    show("rename /usr/no-such x", lambda: os.rename("/usr/guard-no-such", "x"))
    show("rename d e (not empty)", lambda: os.rename("d", "e"))
    show("rename f d", lambda: os.rename("f", "d"))
    show("rename d f", lambda: os.rename("d", "f"))
    show("rename d d/sub", lambda: os.rename("d", "d/sub"))
    # link(2), symlink(2), mknod(2)
    show("link f newlink/", lambda: os.link("f", "newlink/"))
    show("link f/ nl", lambda: os.link("f/", "nl"))
    show("linkat AT_SYMLINK_FOLLOW lf hardf", lambda: linkat(AT_FDCWD, "lf", "hardf", AT_SYMLINK_FOLLOW))
    show("linkat lf hardl", lambda: linkat(AT_FDCWD, "lf", "hardl", 0))
    show("link f d", lambda: os.link("f", "d"))
    show("link d dl", lambda: os.link("d", "dl"))
    show("link /usr/no-such x", lambda: os.link("/usr/guard-no-such", "x"))
    show("link f /usr", lambda: os.link("f", "/usr"))
    show("symlink x newsym/", lambda: os.symlink("x", "newsym/"))
    show("symlink x f/", lambda: os.symlink("x", "f/"))
    show("symlink x /usr", lambda: os.symlink("x", "/usr"))
    show("mkfifo newfifo/", lambda: os.mkfifo("newfifo/"))
    show("mknod /usr", lambda: os.mknod("/usr", 0o644 | stat.S_IFIFO))
    # truncate(2), chmod(2), chown(2)
    show("truncate f/", lambda: os.truncate("f/", 0))
    show("truncate d", lambda: os.truncate("d", 0))
    show("truncate ff (fifo)", lambda: os.truncate("ff", 0))
    show("truncate loop1", lambda: os.truncate("loop1", 0))
    show("truncate -1", lambda: os.truncate("f", -1))
    show("truncate missing", lambda: os.truncate("missing", 0))
    show("chmod f/", lambda: os.chmod("f/", 0o600))
    show("chmod ld/", lambda: os.chmod("ld/", 0o700))
    show("lchown lf/", lambda: os.lchown("lf/", -1, -1))
    show("chmod /usr/no-such", lambda: os.chmod("/usr/guard-no-such", 0o600))
    # Paths through several directories: every directory on the way must be searchable by
    # the caller (guard may walk them with its own credentials only when that cannot differ).
    for p in ["p", "p/q", "p/q/r", "p/q/r/s", "p/q/r/s/t"]:
        os.mkdir(p)
    for p in ["a", "b", "c", "x", "s/t/deep"]:
        open("p/q/r/" + p, "w").close()
    os.symlink("q", "p/lq")
    show("unlink p/q/r/a", lambda: os.unlink("p/q/r/a"))
    show("unlink p/./q//r/b", lambda: os.unlink("p/./q//r/b"))
    show("unlink p/q/../q/r/c", lambda: os.unlink("p/q/../q/r/c"))
    show("open O_CREAT p/q/r/s/t/new (five deep)", lambda: opened("p/q/r/s/t/new", C | W))
    show("unlink p/q/r/s/t/deep", lambda: os.unlink("p/q/r/s/t/deep"))
    show("open O_CREAT p/lq/r/vialink (a symlink on the way)", lambda: opened("p/lq/r/vialink", C | W))
    show("unlink p/lq/r/missing", lambda: os.unlink("p/lq/r/missing"))
    show("unlink p/q/r/x/y (a file on the way)", lambda: os.unlink("p/q/r/x/y"))
    show("unlink p/missing/r/x", lambda: os.unlink("p/missing/r/x"))
    show("link p/q/r/x p/q/r/s/xl", lambda: os.link("p/q/r/x", "p/q/r/s/xl"))
    show("rename p/q/r/s/xl p/q/xl2", lambda: os.rename("p/q/r/s/xl", "p/q/xl2"))
    here = os.getcwd()
    show("open O_CREAT <cwd>/p/q/abs (absolute)", lambda: opened(here + "/p/q/abs", C | W))
    show("unlink <cwd>/p/q/abs (absolute)", lambda: os.unlink(here + "/p/q/abs"))
    show("unlink <cwd>//p/./q/missing (absolute)", lambda: os.unlink(here + "//p/./q/missing"))
    os.chmod("p/q", 0o600)
    show("unlink <cwd>/p/q/r/x (absolute, p/q not searchable)", lambda: os.unlink(here + "/p/q/r/x"))
    show("unlink p/q/r/x (p/q not searchable)", lambda: os.unlink("p/q/r/x"))
    show("open O_CREAT p/q/r/new2 (p/q not searchable)", lambda: opened("p/q/r/new2", C | W))
    show("unlink p/lq/r/x (through a symlink to p/q)", lambda: os.unlink("p/lq/r/x"))
    show("unlink p/q/r/missing (p/q not searchable)", lambda: os.unlink("p/q/r/missing"))
    os.chmod("p/q", 0o755)
    os.chmod("p/q/r/s", 0o644)
    show("unlink p/q/r/s/t/new (p/q/r/s not searchable)", lambda: os.unlink("p/q/r/s/t/new"))
    show("rename p/q/r/s/t/new p/moved (from behind it)", lambda: os.rename("p/q/r/s/t/new", "p/moved"))
    show("link p/q/r/x p/q/r/s/t/xl (into behind it)", lambda: os.link("p/q/r/x", "p/q/r/s/t/xl"))
    os.chmod("p/q/r/s", 0o755)
    # Descriptors the caller does not have, or that are no directory: EBADF and ENOTDIR, the
    # kernel's answers before any path is looked at.
    closed = os.open(".", os.O_RDONLY)
    os.close(closed)
    for fd, what in [(closed, "closed"), (4000, "never opened")]:
        show(f"unlink x at a {what} dirfd", lambda: os.unlink("x", dir_fd=fd))
        show(f"mkdir x at a {what} dirfd", lambda: os.mkdir("x", dir_fd=fd))
        show(f"open O_CREAT x at a {what} dirfd", lambda: os.open("x", C | W, 0o644, dir_fd=fd))
        show(f"rename x to y at a {what} dirfd", lambda: os.rename("x", "y", src_dir_fd=fd))
        show(f"symlink f x at a {what} dirfd", lambda: os.symlink("f", "x", dir_fd=fd))
        show(f"fchmod of a {what} descriptor", lambda: os.fchmod(fd, 0o644))
        show(f"fchown of a {what} descriptor", lambda: os.fchown(fd, os.getuid(), os.getgid()))
        show(f"futimens of a {what} descriptor", lambda: os.utime(fd))
        show(f"linkat AT_EMPTY_PATH of a {what} descriptor", lambda: linkat(fd, "", "fdlink", AT_EMPTY_PATH))
    show("fexecve of a never opened descriptor", lambda: os.execve(4000, ["x"], {}))
    r, w = os.pipe()
    show("unlink x at a pipe as dirfd", lambda: os.unlink("x", dir_fd=r))
    show("mkdir x at a pipe as dirfd", lambda: os.mkdir("x", dir_fd=r))
    os.close(r)
    os.close(w)
    # Opens for writing of the caller's own files, by their modes: a root guard opens these
    # with its own capabilities when the owner's bits prove the caller could, else as the
    # caller (the kernel's answer).
    for name, m in [("m444", 0o444), ("m200", 0o200), ("m600", 0o600), ("m000", 0o000), ("m400", 0o400)]:
        show(f"open O_CREAT|O_EXCL {name} mode {m:o}", lambda: opened(name, C | X | W, m))
    show("open O_WRONLY m444", lambda: opened("m444", W))
    show("open O_RDWR m200", lambda: opened("m200", os.O_RDWR))
    show("open O_WRONLY m200", lambda: opened("m200", W))
    show("open O_WRONLY|O_APPEND m600", lambda: opened("m600", W | os.O_APPEND))
    show("open O_WRONLY m000", lambda: opened("m000", W))
    show("open access mode 3 m200", lambda: opened("m200", os.O_ACCMODE))
    show("open access mode 3 m400", lambda: opened("m400", os.O_ACCMODE))
    show("open access mode 3 m600", lambda: opened("m600", os.O_ACCMODE))
    show("open O_WRONLY|O_CREAT m444 (there)", lambda: opened("m444", W | C))
    show("open O_WRONLY|O_CREAT m600 (there)", lambda: opened("m600", W | C))
    show("open O_CREAT|O_EXCL m600 (there)", lambda: opened("m600", C | X | W))
    show("open O_WRONLY|O_TRUNC m444", lambda: opened("m444", W | os.O_TRUNC))
    # Creates that truncate: a root guard makes a new file itself, exclusively (the kernel
    # ignores O_TRUNC for a file the open makes); a file there is truncated only as the caller.
    with open("t444", "w") as f:
        f.write("keep")
    os.chmod("t444", 0o444)
    show("open O_WRONLY|O_CREAT|O_TRUNC t444 (there, not writable)",
         lambda: opened("t444", W | C | os.O_TRUNC))
    show("open O_WRONLY|O_CREAT|O_TRUNC trnew (new)", lambda: opened("trnew", W | C | os.O_TRUNC))
    show("open O_WRONLY ld (a directory)", lambda: opened("ld", W))
    os.mkdir("ro")
    os.chmod("ro", 0o555)
    show("open O_CREAT ro/new (directory not writable)", lambda: opened("ro/new", C | W))
    show("open O_CREAT|O_EXCL ro/new (directory not writable)", lambda: opened("ro/new", C | X | W))
    show("open O_CREAT|O_TRUNC ro/trnew (directory not writable)",
         lambda: opened("ro/trnew", C | W | os.O_TRUNC))
    os.chmod("ro", 0o300)
    show("open O_CREAT ro/new2 (directory write and search only)", lambda: opened("ro/new2", C | W))
    show("open O_CREAT|O_TRUNC ro/trnew2 (directory write and search only)",
         lambda: opened("ro/trnew2", C | W | os.O_TRUNC))
    os.chmod("ro", 0o555)
    show("mkdir ro/newdir (directory not writable)", lambda: os.mkdir("ro/newdir"))
    show("symlink ro/newlink (directory not writable)", lambda: os.symlink("f", "ro/newlink"))
    os.chmod("ro", 0o755)
    show("mkdir ro/md mode 700", lambda: os.mkdir("ro/md", 0o700))
    show("mkdir ro/md (there)", lambda: os.mkdir("ro/md"))
    show("mkdir ro/sticky mode 1777", lambda: os.mkdir("ro/sticky", 0o1777))
    show("mkdir ro/sgid mode 2775", lambda: os.mkdir("ro/sgid", 0o2775))
    show("symlink ro/ls", lambda: os.symlink("../f", "ro/ls"))
    show("symlink ro/ls (there)", lambda: os.symlink("../f", "ro/ls"))
    os.chmod("ro", 0o300)
    show("mkdir ro/wx (directory write and search only)", lambda: os.mkdir("ro/wx"))
    os.chmod("ro", 0o755)
    for name in ["m444", "m200", "m600", "m000", "m400"]:
        os.chmod(name, 0o644)
    # The kernel compares the parents' mounts before it looks at `.` and `..`: rustix tells
    # /proc is a mount point by the EXDEV of this rename (and trusts procfs only then).
    proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
    show("rename ../. . at /proc", lambda: os.rename("../.", ".", src_dir_fd=proc, dst_dir_fd=proc))
    show("rename . ../. at /proc", lambda: os.rename(".", "../.", src_dir_fd=proc, dst_dir_fd=proc))
    show("rename .. x at /proc", lambda: os.rename("..", "x", src_dir_fd=proc, dst_dir_fd=proc))
    os.close(proc)
    # Addresses: a bind to one this machine does not have fails with EADDRNOTAVAIL whatever
    # the policy says; a connect to the unspecified address goes to loopback (nothing listens
    # on port 1 there).
    import socket
    for family, host in [(socket.AF_INET, "1.1.1.1"), (socket.AF_INET6, "2001:db8::1")]:
        with socket.socket(family) as s:
            show(f"bind {host} port 9999", lambda: s.bind((host, 9999)))
    for family, host in [(socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")]:
        with socket.socket(family) as s:
            show(f"connect {host} port 1", lambda: s.connect((host, 1)))
    # What is left.
    for root, dirs, files in sorted(os.walk(".")):
        for name in sorted(dirs + files):
            p = os.path.join(root, name)
            st = os.lstat(p)
            kind = stat.S_IFMT(st.st_mode)
            detail = os.readlink(p) if stat.S_ISLNK(st.st_mode) else oct(st.st_mode & 0o7777)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    detail += " " + repr(f.read())
            print(f"tree: {p} {kind:o} {detail} nlink={st.st_nlink}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
