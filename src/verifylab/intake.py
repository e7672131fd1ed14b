"""The one way a file from outside is read: checked before a byte is read. It must be a regular file (not a FIFO
that hangs, a device that never ends, a directory), at most a size the kind of file can sensibly have, and (for
files inside a store or a tree) no link out of its root. Errors are one line naming the file and never echo its
content. Parameters, campaigns, curves, the public table and a stored run's files are read through
:func:`read_outside_bytes`; traces (streamed by their reader) and gate trees are checked with :func:`checked_file`;
``tests/faults`` hold each class of bad file against them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from verifylab.errors import ParameterError, VerifylabError

MIB = 1 << 20
LIMITS = {  # the most a file of each kind may hold (bytes): far above any real one, far below what hurts
    "parameters": 1 * MIB,
    "campaign": 1 * MIB,
    "curve": 16 * MIB,
    "policy": 1 * MIB,
    "manifest": 4 * MIB,
    "table": 256 * MIB,
    "record": 64 * MIB,
    "archive": 1024 * MIB,
}


class OutsideFileError(VerifylabError):
    """A file from outside that verifylab refuses to read (its kind, what is wrong)."""


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device")):
        if test(mode):
            return name
    return "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` is no link and lies inside ``root`` (its folders resolved)."""
    return not path.is_symlink() and path.resolve().is_relative_to(Path(root).resolve())


def checked_file(path: Path, kind: str, root: Path | None = None) -> Path:
    """``path`` when it names a regular file (and, with ``root``, lies inside ``root`` through no link); else
    :class:`OutsideFileError` naming it. Reads nothing."""
    if root is not None and not inside(path, root):
        raise OutsideFileError(f"{path}: a link (or a path) out of {root}: refused as a {kind} file")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise OutsideFileError(f"{path}: no such {kind} file") from None
    except OSError as exc:
        raise OutsideFileError(f"{path}: cannot read this {kind} file ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise OutsideFileError(f"{path}: {_kind_of(mode)}, not a {kind} file")
    return path


def read_outside_bytes(path: Path, kind: str, root: Path | None = None, limit: int | None = None) -> bytes:
    """The bytes of a ``kind`` file, checked first (see :func:`checked_file`) and at most ``limit`` (default
    :data:`LIMITS` of the kind) bytes long; opened without blocking, so a file swapped for a FIFO cannot hang."""
    path = Path(path)
    cap = LIMITS[kind] if limit is None else limit
    checked_file(path, kind, root)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (getattr(os, "O_NOFOLLOW", 0) if root is not None else 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise OutsideFileError(f"{path}: cannot open this {kind} file ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):  # replaced between the check and the open
            raise OutsideFileError(f"{path}: {_kind_of(info.st_mode)}, not a {kind} file")
        if info.st_size > cap:
            raise OutsideFileError(f"{path}: {info.st_size} bytes, more than a {kind} file may hold ({cap})")
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise OutsideFileError(f"{path}: more than a {kind} file may hold ({cap} bytes)")
    return data


def read_outside_text(path: Path, kind: str, root: Path | None = None, limit: int | None = None) -> str:
    """:func:`read_outside_bytes` decoded as UTF-8; one line naming the byte where it is not UTF-8."""
    data = read_outside_bytes(path, kind, root, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OutsideFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


ARCHIVE_MEMBERS = 2000  # a device run's archive holds a few dozen files
ARCHIVE_BYTES = 512 * MIB  # unpacked, in all


def unpack_archive(archive: Path, into: Path, members: int = ARCHIVE_MEMBERS, total: int = ARCHIVE_BYTES) -> Path:
    """Unpack a tar archive from outside (a device run's ``reads.tar.gz``) into the new folder ``into``: only regular
    files and folders (no link, device or FIFO), no member outside ``into`` (the tar ``data`` filter), at most
    ``members`` members and ``total`` bytes, counted from the archive's headers before a byte is written and again as
    each member is written. Anything else is :class:`OutsideFileError` naming the member; ``into`` is removed."""
    import shutil
    import tarfile

    if not hasattr(tarfile, "data_filter"):  # Python < 3.11.4
        raise OutsideFileError(f"{archive}: this Python has no tar data filter (3.11.4 or newer is needed)")
    checked_file(Path(archive), "archive")
    into = Path(into)
    into.mkdir(parents=True, exist_ok=False)
    try:
        with tarfile.open(archive, "r:*") as tar:
            infos: list[tarfile.TarInfo] = []
            size = 0
            for info in tar:
                if len(infos) >= members:
                    raise OutsideFileError(f"{archive}: more than {members} members: refused")
                if not (info.isreg() or info.isdir()):
                    raise OutsideFileError(f"{archive}: member {info.name!r} is not a regular file or folder: refused")
                parts = Path(info.name).parts
                if Path(info.name).is_absolute() or ".." in parts or not parts:
                    raise OutsideFileError(f"{archive}: member {info.name!r} names a path outside the archive: refused")
                size += info.size
                if size > total:
                    raise OutsideFileError(f"{archive}: more than {total} bytes unpacked: refused")
                infos.append(info)
            for info in infos:
                try:
                    tar.extract(info, into, filter="data")
                except tarfile.FilterError as exc:
                    raise OutsideFileError(f"{archive}: member {info.name!r}: {exc}") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        shutil.rmtree(into, ignore_errors=True)
        raise OutsideFileError(f"{archive}: not a readable tar archive ({exc})") from None
    except BaseException:
        shutil.rmtree(into, ignore_errors=True)
        raise
    return into


def is_evidence_folder(folder: Path) -> bool:
    """Whether ``folder`` is a verifylab data folder (it holds ``runs/`` and ``reference/``)."""
    return (folder / "runs").is_dir() and (folder / "reference").is_dir()


def require_evidence_folder(
    data_dir: Path, flag: str = "--data-dir", holding: tuple[str, ...] = ("runs", "reference")
) -> None:
    """The data folder a command reads, checked before it measures or computes anything: missing (a command run
    outside the checkout looks for ``data`` where it is run), a file, or a folder without the subfolders it needs
    (``holding``: a decision needs ``runs/`` and ``reference/``, the run store's commands only the folder) is refused
    in one line that says what to give."""
    folder = Path(data_dir)
    fix = f"verifylab reads its evidence from its checkout's data/ folder: run there, or give {flag} PATH/TO/data"
    if not folder.exists():
        raise ParameterError(f"{flag} {data_dir}: no such folder ({folder.resolve()}); {fix}")
    if not folder.is_dir():
        raise ParameterError(f"{flag} {data_dir}: a file, not a folder; {fix}")
    missing = [f"{name}/" for name in holding if not (folder / name).is_dir()]
    if missing:
        raise ParameterError(f"{flag} {data_dir}: not a verifylab data folder (no {' or '.join(missing)} in it); {fix}")


def refuse_write_into_data(
    output: Path,
    flag: str,
    data_dir: Path | None = None,
    inputs: tuple[Path, ...] = (),
    file: str | None = None,
    writes_folder: bool = False,
) -> None:
    """The one check on a file or folder a command writes where the user says (``--csv``, ``--out``): inside a data
    folder (``data_dir``, or any evidence folder on the output's resolved path) only a run's own store methods write,
    so an output there is refused with the path named; so is an output that is one of ``inputs``, where the command
    writes one file (``file``: the name to suggest) a folder already there, and where it writes a folder
    (``writes_folder``) a file already there (usage errors)."""
    if file is not None and Path(output).is_dir():
        raise ParameterError(f"{flag} {output}: a folder; give a file name, e.g. {Path(output) / file}")
    if file is not None and Path(output).exists() and not Path(output).is_file():
        raise ParameterError(f"{flag} {output}: not a regular file (a device, FIFO or socket); give a file name")
    if writes_folder and Path(output).exists() and not Path(output).is_dir():
        raise ParameterError(f"{flag} {output}: a file is there; give a folder (the command writes several files)")
    out = Path(output).resolve()
    protected = [Path(data_dir).resolve()] if data_dir is not None else []
    protected += [folder for folder in (out, *out.parents) if is_evidence_folder(folder)]
    for folder in protected:
        if out == folder or folder in out.parents:
            raise OutsideFileError(
                f"{flag} {output}: inside the data folder {folder} (its inputs and runs are written only by the run "
                f"store); write it elsewhere"
            )
    refuse_output_over_input(output, list(inputs), flag)


def refuse_output_over_input(output: Path, inputs: list[Path], flag: str) -> None:
    """An output file that is one of the inputs (by path or by inode, links included) is refused: writing it
    would destroy what was read."""
    out = Path(output)
    for given in inputs:
        source = Path(given)
        same = out.resolve() == source.resolve()
        if not same and out.exists() and source.exists():
            same = os.path.samefile(out, source)
        if same:
            raise OutsideFileError(f"{flag} {out}: that is an input ({source}); write the output elsewhere")
