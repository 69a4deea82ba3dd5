"""Writing files safely: atomic writes, temporary directories that never outlive their process,
the user's umask on everything written, and paths read from files kept inside their root.

Temporary names carry the writer's host and pid (`.NAME.HOST-PID.RANDOM.eaglezoo-tmp`), so a later
run on the same host that writes beside them can tell a killed run's leftovers (pid gone) from a live
run's work; another host's temporaries (a shared file system) are never touched.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
from pathlib import Path, PurePosixPath

from .errors import BadInput, UsageError

TMP_SUFFIX = ".eaglezoo-tmp"
HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TMP_NAME = re.compile(r"^\..*\.([0-9a-f]{8})-(\d+)\.[^.]+\.eaglezoo-tmp$")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


UMASK = _umask()
FILE_MODE = 0o666 & ~UMASK
DIR_MODE = 0o777 & ~UMASK


def _prefix(dest: Path) -> str:
    return f".{dest.name[:100]}.{HOST}-{os.getpid()}."


def file_destination(path: Path, what: str = "output") -> Path:
    """`path` when a file can be written there: refused up front (before a long run) when it is a
    directory or its folder does not exist."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(
            f"{what} {path} is a directory; give a file name", hint="give a file name, e.g. DIR/report.json"
        )
    if not path.parent.is_dir():
        raise UsageError(
            f"{what} {path}: folder {path.parent} does not exist", hint="create the folder first, or write elsewhere"
        )
    if path.exists() and not path.is_file():  # a FIFO or a device: replacing it would destroy it
        raise UsageError(
            f"{what} {path} exists and is not a regular file", hint="give the name of a new or regular file"
        )
    return path


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = file_destination(path)
    parent = path.parent if str(path.parent) else Path(".")
    sweep_stale(parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=_prefix(path), suffix=TMP_SUFFIX, dir=parent)
    except OSError as exc:
        raise UsageError(
            f"cannot write {path}: {exc.strerror or exc}",
            hint="check the permissions and free space there, or write elsewhere",
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def temp_dir_beside(dest: Path) -> Path:
    """A fresh temporary directory in dest's parent (same file system, so it can be renamed into place)."""
    sweep_stale(dest.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=_prefix(dest), suffix=TMP_SUFFIX, dir=dest.parent))
    except OSError as exc:
        raise UsageError(
            f"cannot write {dest}: {exc.strerror or exc}",
            hint="check the permissions and free space there, or write elsewhere",
        ) from None
    os.chmod(tmp, DIR_MODE)  # mkdtemp makes 0700; the output must be readable as the umask allows
    return tmp


@contextlib.contextmanager
def staging(dest: Path):
    """A temporary directory beside `dest`, missing parents made. The caller moves its contents into
    place; on any failure (signals included) the directory and the parents made for it are removed."""
    created = [p for p in reversed(dest.absolute().parents) if not p.exists()]
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            yield temp_dir_beside(dest)
        finally:
            # By our own prefix, not by the returned path: a signal can land between mkdtemp and the return.
            for tmp in dest.parent.glob(glob.escape(_prefix(dest)) + "*" + TMP_SUFFIX):
                shutil.rmtree(tmp, ignore_errors=True)  # gone already when it was renamed into place
    except BaseException:
        for parent in reversed(created):
            with contextlib.suppress(OSError):
                parent.rmdir()
        raise


def sweep_stale(parent: Path) -> list[Path]:
    """Removes eaglezoo temporaries in `parent` whose writing process is gone; returns them."""
    removed = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        match = _TMP_NAME.match(name)
        if not match or match.group(1) != HOST or _alive(int(match.group(2))):
            continue
        path = Path(parent) / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def relative_name(root: Path, relative: str, what: str) -> PurePosixPath:
    """`relative` as a path under `root`: refused when empty, absolute or written with backslashes."""
    name = PurePosixPath(str(relative))
    if not str(relative) or name.is_absolute() or "\\" in str(relative):
        raise BadInput(
            f"{what} {relative!r} must be a relative path inside {root}",
            hint="give a path relative to the registry's repository",
        )
    return name


def inside(root: Path, relative: str, what: str) -> Path:
    """`root / relative`, refused when it resolves outside `root` (for writing and uploading: no
    symlink may lead out)."""
    path = Path(root) / relative_name(root, relative, what)
    real_root = Path(root).resolve()
    if path.resolve() != real_root and real_root not in path.resolve().parents:
        raise BadInput(f"{what} {relative!r} leaves {root}: refused", hint="keep the path inside the repository")
    return path


def child_path(root: Path, relative: str, what: str) -> Path:
    """`root / relative` for a name without `..`: inside the folder as named. The file may be a
    symlink to elsewhere (the Hub cache's snapshots link every file to its blob), which reading allows."""
    name = relative_name(root, relative, what)
    if ".." in name.parts:
        raise BadInput(
            f"{what} {relative!r} must be a relative path inside {root}", hint="give a path relative to the folder"
        )
    return Path(root) / name


FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


def regular_file(path: Path, what: str) -> Path:
    """`path` when it is (or links to) a regular file; anything else refused by name, never opened
    (reading a FIFO blocks forever, a device never ends)."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise BadInput(
            f"{what}: {path} not found", hint="correct the path, or download or create the missing file"
        ) from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise BadInput(
            f"{what}: {path} is a symlink loop (too many levels of symbolic links)", hint="fix or remove that symlink"
        ) from None
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in FILE_KINDS if test(mode)), "not a file")
        raise BadInput(f"{what}: {path} is {kind}, not a regular file", hint="give a regular file")
    return path


def within(path: Path, folder: Path) -> bool:
    """`path` is `folder` or below it, symlinks resolved (an unresolvable path is left to its own reader)."""
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except (OSError, RuntimeError):
        return False


def refuse_overlap(out: Path, source: Path, source_name: str) -> None:
    """A folder OUT written whole is never `source` (what the command reads), inside it or above it."""
    if within(out, source) or within(source, out):
        raise UsageError(
            f"OUT {out} overlaps {source_name} {source}: {source_name} is never modified",
            hint=f"choose an OUT outside {source_name} (and not one of its parents)",
        )


def check_out_dir(out: Path, force: bool, source: Path, source_name: str) -> None:
    """A folder OUT that a command writes whole (`convert`, `registry site`): never overlapping `source`
    (`refuse_overlap`); refused when it exists, unless `force` (then it must be a folder, replaced whole, never
    mixed with what it held), or when a path component above it is a file."""
    out = Path(out)
    refuse_overlap(out, source, source_name)
    if os.path.lexists(out) and not force:
        raise UsageError(f"{out} already exists", hint="choose a new OUT or pass --force to replace it")
    if os.path.lexists(out) and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory", hint="choose a new OUT, or remove that file")
    existing = next(p for p in out.absolute().parents if p.exists())
    if not existing.is_dir():
        raise UsageError(
            f"cannot write {out}: {existing} is not a directory", hint="choose an OUT whose parent is a folder"
        )


def replace_dir(tmp: Path, out: Path, force: bool) -> None:
    """Renames the finished folder `tmp` to `out` in one step. With `force`, an existing `out` is first
    renamed aside (then removed), so OUT is at every moment either the old folder or the new one. A run
    racing to the same new OUT may have made it since it was checked: that one's output stays."""
    if force and out.is_dir():
        old = temp_dir_beside(out)
        os.rename(out, old / out.name)
        os.rename(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
        return
    try:
        os.rename(tmp, out)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR) and os.path.lexists(out):
            raise UsageError(f"{out} already exists", hint="choose a new OUT or pass --force to replace it") from None
        raise


def move_into(tmp: Path, dest: Path) -> None:
    """Moves the contents of `tmp` into `dest` (created when missing), file by file, then removes tmp."""
    if not dest.exists():
        os.rename(tmp, dest)
        return
    for path in sorted(tmp.rglob("*")):
        target = dest / path.relative_to(tmp)
        if path.is_dir():
            target.mkdir(mode=DIR_MODE, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    shutil.rmtree(tmp, ignore_errors=True)


def too_many_digits(where: str) -> BadInput:
    """The refusal of a number longer than Python reads from text (`sys.get_int_max_str_digits()`, 4,300 by
    default): the limit stays, it guards against quadratic-time parsing; no count or size is that long."""
    return BadInput(
        f"{where} holds a number with too many digits (over {sys.get_int_max_str_digits()})",
        hint="correct that number: no count or size has that many digits",
    )


def parse_json(text: str, where: str):
    """JSON text as a value. The one parse whose failures are the caller's to word, except a number with too
    many digits (a ValueError that is not a JSONDecodeError), refused here naming `where`."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeError):
        raise
    except ValueError:
        raise too_many_digits(where) from None


def read_json(path: Path, what: str, max_bytes: int | None = None) -> dict:
    """A JSON object from a file; `max_bytes`: a larger file is refused before any of it is read."""
    regular_file(path, what)
    size = path.stat().st_size
    if max_bytes is not None and size > max_bytes:
        raise BadInput(
            f"{what}: {path} holds {size:,} bytes; expected at most {max_bytes:,}",
            hint="give a file eaglezoo wrote (none is this large)",
        )
    try:
        value = parse_json(path.read_bytes().decode("utf-8"), f"{what}: {path}")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{what}: {path} is not valid UTF-8 text (byte {exc.start})", hint="save it as UTF-8") from None
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{what}: {path} is not valid JSON ({exc.args[0]})", hint="fix the JSON (the position is in the message)"
        ) from None
    except RecursionError:
        raise BadInput(
            f"{what}: {path} is nested too deeply to read", hint="give a file holding one JSON object"
        ) from None
    if not isinstance(value, dict):
        raise BadInput(f"{what}: {path} is not a JSON object", hint="give a file holding one JSON object")
    return value


def sha256_file(path: Path, chunk_bytes: int = 16 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            h.update(chunk)
    return h.hexdigest()
