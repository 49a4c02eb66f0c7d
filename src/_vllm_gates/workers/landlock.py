"""Linux Landlock through its three system calls (ctypes, standard library only): a process restricts itself, and
every process it starts, to the files its rules name (docs/worker-protocol.md §2.2, "The implementation's sandbox").

Landlock is an allow-list: once restricted, a file is opened only where some rule on it or on a folder above it
grants the access. ``Rules`` names what stays reachable; ``restrict`` applies them (one way: there is no undoing
it). ``python landlock.py RULES_JSON COMMAND...`` restricts itself, then runs COMMAND in its place (how the judge
starts an external implementation's worker). Network, signals and processes are left alone.
"""
from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

# linux/landlock.h; the system call numbers are the same on x86_64 and aarch64 (asm-generic)
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15  # Landlock ABI 2, 3 and 5

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # the rights a rule on a file (not a folder) may hold
READS = EXECUTE | READ_FILE | READ_DIR | IOCTL_DEV
WRITES = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK
          | MAKE_SYM | REFER | TRUNCATE)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]  # the first field only: every ABI accepts the short struct


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@dataclass(frozen=True)
class Rules:
    """What a restricted process may still reach, as absolute paths: ``read`` (files and trees it may read and run),
    ``list_only`` (trees whose folders it may list, reading no file), ``write`` (trees it may also create, change
    and remove files in), ``hidden``: a tree of which nothing is readable but what the rules above name, while
    everything outside it stays readable (each entry of each folder above it, but the one leading to it), and
    ``write_around``: trees writable but for the part of ``hidden`` (a project inside the temp folder stays closed)."""

    read: tuple[str, ...] = ()
    list_only: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    hidden: str | None = None
    write_around: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Rules:
        data = json.loads(text)
        return cls(tuple(data["read"]), tuple(data["list_only"]), tuple(data["write"]), data["hidden"],
                   tuple(data["write_around"]))


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The Landlock ABI this kernel offers (1 from Linux 5.13); 0 where it has none (another system, an older
    kernel, Landlock left out of the boot's LSM list)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        version = _libc().syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(int(version), 0)


def handled_rights(abi: int) -> int:
    """Every file-system right the given ABI knows: each is refused unless a rule grants it."""
    rights = READS & ~IOCTL_DEV | WRITES & ~(REFER | TRUNCATE)
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def outside(tree: str, within: str = "/") -> list[str]:
    """Every path of ``within`` beside the way down to ``tree`` (both resolved): the other entries of ``within`` and
    of each folder between; an entry that leads into ``tree``, or to a folder above it, through a symlink is left
    out. ``within`` itself when ``tree`` does not lie inside it, nothing when it is ``tree``."""
    real, folder = os.path.realpath(tree), os.path.realpath(within)
    if real == folder:
        return []
    if not real.startswith(folder.rstrip("/") + "/"):
        return [folder]
    found = []
    for part in [p for p in real[len(folder):].split("/") if p]:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        for name in names:
            if name == part:
                continue
            path = os.path.join(folder, name)
            resolved = os.path.realpath(path)
            if _overlap(resolved, real):  # a symlink into the tree, or to a folder holding it (pytest's `*current`)
                continue
            found.append(path)
        folder = os.path.join(folder, part)
    return found


def _overlap(one: str, other: str) -> bool:
    """Whether two resolved paths are the same, or one lies inside the other."""
    return one == other or other.startswith(one.rstrip("/") + "/") or one.startswith(other.rstrip("/") + "/")


def restrict(rules: Rules) -> int:
    """Restrict this process (and what it starts from now on) to ``rules``; the ABI it was done with. OSError when
    the kernel has no Landlock or refuses a rule (naming the path); a path that no longer exists is skipped."""
    abi = abi_version()
    if abi < 1:
        raise OSError("this kernel has no Landlock (Linux 5.13 or later, with landlock in its LSM list)")
    libc, handled = _libc(), handled_rights(abi)
    attr = _RulesetAttr(handled)
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        granted = [(path, READS) for path in (outside(rules.hidden) if rules.hidden else [])]
        granted += [(path, READS) for path in rules.read] + [(path, READ_DIR) for path in rules.list_only]
        granted += [(path, READS | WRITES) for path in rules.write]
        granted += [(path, READS | WRITES) for tree in rules.write_around
                    for path in (outside(rules.hidden, tree) if rules.hidden else [tree])]
        for path, rights in granted:
            _add_rule(libc, ruleset, path, rights & handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
        if libc.syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)
    return abi


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    except OSError as error:  # a path it may not even look up (no search right on a folder): it stays out of reach
        if error.errno in (errno.EACCES, errno.EPERM):
            return
        raise
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
            if not rights:
                return
        beneath = _PathBeneathAttr(rights, fd)
        if libc.syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(beneath),
                        ctypes.c_uint32(0)) != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"landlock_add_rule on {path!r}: {os.strerror(number)}")
    finally:
        os.close(fd)


def main(argv: Sequence[str]) -> int:
    """``landlock.py RULES_JSON COMMAND...``: restricted to the rules, become COMMAND (exit 126 when it cannot)."""
    if len(argv) < 2:
        print("usage: landlock.py RULES_JSON COMMAND [ARG...]", file=sys.stderr)
        return 2
    try:
        restrict(Rules.from_json(argv[0]))
        os.execvp(argv[1], list(argv[1:]))
    except OSError as error:
        print(f"vllm-gates sandbox: cannot start {argv[1]!r}: {error}", file=sys.stderr)
    return 126


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
