"""Reading a published wheel verifylab did not build, and parsing its Python: with limits on members, bytes per member,
bytes in all and nesting, so that a hostile or broken wheel (a zip bomb, a truncated download, an HTML error page
saved as ``.whl``, a source nested past the parser) ends in one line naming the wheel and what is wrong."""

from __future__ import annotations

import ast
import contextlib
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from verifylab.errors import GateError

MAX_MEMBERS = 60_000  # SGLang's and FlashInfer's wheels hold under 10,000 files
MAX_MEMBER_BYTES = 4 << 20  # their largest source or header is under 2 MiB: parsing one stays within memory
MAX_READ_BYTES = 128 << 20  # what one audit may decompress from one wheel in all
REMEDY = "delete it from the wheel cache and run again (it is downloaded afresh)"


class WheelReader:
    """One open wheel: its member names and each member's text, read within the limits above."""

    def __init__(self, path: Path, archive: zipfile.ZipFile) -> None:
        self.path = path
        self._archive = archive
        self._read = 0
        self._infos = {info.filename: info for info in archive.infolist()}

    def names(self) -> list[str]:
        """Every member's name, in the wheel's order."""
        return list(self._infos)

    def read_bytes(self, name: str) -> bytes:
        """One member's bytes; a member past the size limit, or the wheel past its total, is refused."""
        info = self._infos[name]
        if info.file_size > MAX_MEMBER_BYTES:
            raise GateError(
                f"{self.path.name}:{name}: {info.file_size:,} bytes unpacked, more than any source a wheel of SGLang "
                f"or FlashInfer holds ({MAX_MEMBER_BYTES >> 20} MiB): refused"
            )
        try:
            with self._archive.open(info) as member:
                data = member.read(MAX_MEMBER_BYTES + 1)  # the declared size may lie: never read past the limit
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
            raise GateError(f"{self.path.name}:{name}: cannot be read ({exc}): {REMEDY}") from None
        if len(data) > MAX_MEMBER_BYTES:
            raise GateError(
                f"{self.path.name}:{name}: unpacks past {MAX_MEMBER_BYTES >> 20} MiB (its header says "
                f"{info.file_size:,} bytes): a zip bomb, refused"
            )
        self._read += len(data)
        if self._read > MAX_READ_BYTES:
            raise GateError(f"{self.path.name}: more than {MAX_READ_BYTES >> 20} MiB unpacked in all: refused")
        return data

    def read_text(self, name: str, missing: str | None = None) -> str:
        """One member as text (undecodable bytes replaced); ``missing`` when there is no such member (None: refused)."""
        if name not in self._infos:
            if missing is None:
                raise GateError(f"{self.path.name}: holds no {name}")
            return missing
        return self.read_bytes(name).decode("utf-8-sig", errors="replace")


@contextlib.contextmanager
def open_wheel(path: Path) -> Iterator[WheelReader]:
    """``path`` opened as a wheel; anything that is not a whole zip of plain relative names is one line."""
    try:
        archive = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise GateError(f"{path}: no such wheel") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise GateError(f"{path.name}: not a readable wheel ({exc}): {REMEDY}") from None
    with archive:
        infos = archive.infolist()
        if len(infos) > MAX_MEMBERS:
            raise GateError(f"{path.name}: {len(infos):,} members, more than a wheel of SGLang or FlashInfer holds")
        unsafe = next((i.filename for i in infos if not _plain_member(i.filename)), None)
        if unsafe is not None:
            raise GateError(f"{path.name}: member {unsafe!r} is not a plain relative path: refused")
        yield WheelReader(path, archive)


def _plain_member(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return bool(parts) and not name.startswith(("/", "\\")) and ".." not in parts and "\\" not in name


def parse_python(text: str, where: str) -> ast.Module:
    """``text`` parsed; a syntax error, a null byte or nesting past the parser's limits is one line naming
    ``where`` (a wheel's member or a file of a tree)."""
    try:
        return ast.parse(text, filename=where)
    except SyntaxError as exc:
        raise GateError(f"{where}: not Python ({exc.msg}, line {exc.lineno})") from None
    except (RecursionError, MemoryError):
        raise GateError(f"{where}: nested deeper than Python's parser goes: not a source to audit") from None
    except ValueError as exc:  # source code string cannot contain null bytes
        raise GateError(f"{where}: not Python ({exc})") from None
