"""Run one container: enter the pod's network namespace, build its filesystem view in a new mount namespace, exec.

Executed as a script by the stand-in (``python -I -S launcher.py run SPEC.json``), as root, single-threaded, before
the container's command replaces it (same pid: the stand-in signals that pid as the kubelet signals a container's
PID 1). Stdlib only; ``mount``/``setns``/``unshare`` through libc (Python 3.11 has no ``os.unshare``). Steps:

1. ``setns`` into ``/run/netns/<pod>``; ``unshare(CLONE_NEWNS)`` and make every mount private (nothing leaks out);
2. a tmpfs at the spec's ``rootfs`` (an empty directory) becomes the container's ``/``: each top-level entry of the
   host's ``/`` is bind-mounted (recursively) or symlinked into it, so the same paths hold the same files -- the
   venv, ``/usr``, ``/etc`` -- and nothing is rewritten; every volume source is first bind-mounted under
   ``/.kubelet`` (so nothing a later mount hides is lost), then ``chroot``;
3. a fresh tmpfs on ``/tmp``; each mount (volumes, the service-account directory, ``/etc/hosts``) is bind-mounted
   at its path, read-only where asked. A missing mount point under a host directory is never created on the host:
   that directory is first *shadowed* (a tmpfs over it holding bind mounts of its entries), then the point is made in
   the tmpfs. The working directory is made the same way when the image does not have it;
4. ``/.kubelet`` is detached; with ``readOnlyRootFilesystem`` every mount but the volumes (and /dev, /proc, /sys) is
   remounted read-only; ``chdir`` to the working directory, ``execvpe`` the command with the pod's environment.

``python -I -S launcher.py exec PID SPEC.json`` runs a probe command inside the same namespaces and root as pid PID.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import sys
from typing import Any

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
STAGE = "/.kubelet"
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _enc(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def mount(source: str | None, target: str, fstype: str | None = None, flags: int = 0, data: str | None = None) -> None:
    enc = _enc
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target} ({fstype or 'bind'})")


def setns(path: str, kind: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        _check(_libc.setns(fd, kind), f"setns {path}")
    finally:
        os.close(fd)


def _bind(source: str, target: str, readonly: bool = False) -> None:
    mount(source, target, None, MS_BIND | MS_REC)
    if readonly:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)


def _mirror(source_dir: str, target_dir: str) -> None:
    """Recreate ``source_dir``'s entries in ``target_dir`` (a tmpfs): symlinks copied, the rest bind-mounted."""
    for entry in sorted(os.listdir(source_dir)):
        src, dst = os.path.join(source_dir, entry), os.path.join(target_dir, entry)
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
            continue
        if stat.S_ISDIR(st.st_mode):
            os.mkdir(dst, stat.S_IMODE(st.st_mode))
        else:
            with open(dst, "w"):
                pass
        _bind(src, dst)


class Root:
    """The container's filesystem view, after ``chroot``: which directories are ours (tmpfs) to create in."""

    def __init__(self) -> None:
        self.ours: set[str] = {"/"}  # the rootfs tmpfs
        self.volumes: list[str] = []  # mount points whose contents belong to a volume (mkdir there is fine)
        self.shadows = 0

    def _writable(self, directory: str) -> bool:
        return directory in self.ours or any(directory == v or directory.startswith(v.rstrip("/") + "/") for v in self.volumes)

    def shadow(self, directory: str) -> None:
        """Put a tmpfs over ``directory`` that still shows its entries (bind mounts), so new names go to the tmpfs."""
        self.shadows += 1
        stage = f"{STAGE}/shadow-{self.shadows}"
        os.mkdir(stage)
        _bind(directory, stage)
        mode = stat.S_IMODE(os.stat(directory).st_mode)
        mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode:o}")
        _mirror(stage, directory)
        self.ours.add(directory)

    def ensure_dir(self, path: str) -> str:
        real = os.path.realpath(path)
        if os.path.isdir(real):
            return real
        parent = self.ensure_dir(os.path.dirname(real))
        if not self._writable(parent):
            self.shadow(parent)
        os.mkdir(os.path.join(parent, os.path.basename(real)), 0o755)
        if parent in self.ours:
            self.ours.add(os.path.join(parent, os.path.basename(real)))
        return os.path.join(parent, os.path.basename(real))

    def ensure_file(self, path: str) -> str:
        real = os.path.realpath(path)
        if os.path.lexists(real):
            return real
        parent = self.ensure_dir(os.path.dirname(real))
        if not self._writable(parent):
            self.shadow(parent)
        with open(real, "w"):
            pass
        return real


def run(spec: dict[str, Any]) -> None:
    setns(spec["netns"], CLONE_NEWNET)
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    rootfs = spec["rootfs"]
    mount("tmpfs", rootfs, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for entry in sorted(os.listdir("/")):
        if entry in ("lost+found",):
            continue
        src, dst = f"/{entry}", f"{rootfs}/{entry}"
        st = os.lstat(src)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
        elif stat.S_ISDIR(st.st_mode):
            os.mkdir(dst, stat.S_IMODE(st.st_mode))
            _bind(src, dst)
        elif stat.S_ISREG(st.st_mode):
            with open(dst, "w"):
                pass
            _bind(src, dst)
    os.mkdir(rootfs + STAGE, 0o700)
    mount("tmpfs", rootfs + STAGE, "tmpfs", MS_NOSUID | MS_NODEV, "mode=700")
    mounts = spec["mounts"]
    for i, m in enumerate(mounts):  # stage every source: a later mount may hide it
        staged = f"{rootfs}{STAGE}/{i}"
        if os.path.isdir(m["source"]):
            os.mkdir(staged)
        else:
            with open(staged, "w"):
                pass
        _bind(m["source"], staged)
    os.chroot(rootfs)
    os.chdir("/")
    root = Root()
    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    root.ours.add("/tmp")
    kept: list[str] = []
    for i, m in sorted(enumerate(mounts), key=lambda im: im[1]["target"].rstrip("/").count("/")):
        staged = f"{STAGE}/{i}"
        target = root.ensure_dir(m["target"]) if os.path.isdir(staged) else root.ensure_file(m["target"])
        _bind(staged, target, readonly=bool(m.get("readOnly")))
        kept.append(target)
        if os.path.isdir(staged):
            root.volumes.append(target)
    for directory in spec.get("imageDirs", []):  # directories the image has (its user's home): empty here
        root.ensure_dir(directory)
    workdir = root.ensure_dir(spec.get("workingDir") or "/")
    _check(_libc.umount2(STAGE.encode(), MNT_DETACH), f"umount {STAGE}")
    try:
        os.rmdir(STAGE)
    except OSError:  # still a mount point in the copy of the host's /tmp tree: harmless, and empty
        pass
    if spec.get("readOnlyRootFilesystem"):
        _read_only_except(kept)
    os.chdir(workdir)
    argv = spec["argv"]
    os.execvpe(argv[0], argv, spec["env"])


def _read_only_except(kept: list[str]) -> None:
    """Remount every mount of this view read-only but the volumes and /dev, /proc, /sys (readOnlyRootFilesystem)."""
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4].encode().decode("unicode_escape") for line in f]
    for point in points:
        if point in kept or any(point == p or point.startswith(p + "/") for p in ("/dev", "/proc", "/sys")):
            continue
        try:
            mount(None, point, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
        except OSError:  # shadowed or detached meanwhile
            pass


def exec_in(pid: int, spec: dict[str, Any]) -> None:
    """Run ``spec["argv"]`` in the namespaces, root and working directory of process ``pid`` (an exec probe)."""
    root_fd = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    cwd = spec.get("workingDir") or "/"
    setns(f"/proc/{pid}/ns/net", CLONE_NEWNET)
    setns(f"/proc/{pid}/ns/mnt", CLONE_NEWNS)
    os.fchdir(root_fd)
    os.chroot(".")
    os.chdir(cwd)
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])


def main(args: list[str]) -> None:
    try:
        if args[0] == "run":
            with open(args[1]) as f:
                run(json.load(f))
        elif args[0] == "exec":
            with open(args[2]) as f:
                exec_in(int(args[1]), json.load(f))
        elif args[0] == "check":  # can this machine do it? (the stand-in asks once, at start)
            _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("tmpfs", args[1], "tmpfs", 0, "mode=755")
            print("ok")
    except OSError as exc:
        print(f"kubelet launcher: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(128) from None


if __name__ == "__main__":
    main(sys.argv[1:])
