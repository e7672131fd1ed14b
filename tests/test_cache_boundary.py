"""#77, caches: one boundary (``verifylab.store.cache_folder``) between the interactive commands and the folder their
answers and derived values are kept in. Hypothesis generates the hostile folders and planted entries: a folder (or a
folder above it) another user owns or can write is refused; a pickle, a link, a FIFO or a forged answer planted in
the caller's own folder is ignored, and nothing planted is ever unpickled; a planted link is replaced, never written
through; a kept answer writes only its page's own files, and prints no terminal control sequence but colours."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import stat
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifylab.entry import PAGE_FILES, kept_answer
from verifylab.errors import CacheFolderRefused
from verifylab.redact import strip_terminal_codes
from verifylab.store.cache_folder import KEY_NAME, cache_folder_open, open_cache_folder
from verifylab.store.derived_disk import DiskDerivedCache

ROOT_USER = os.geteuid() == 0
OTHER_UID = 4242  # a user that is not the caller (tests that need chown run as root, as CI does)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
RAN = Path(tempfile.gettempdir()) / "planted-pickle-ran"  # a planted pickle that is loaded creates this file


class _Planted:
    """Unpickling this runs code: it creates :data:`RAN` (what a planted pickle would do with a shell command)."""

    def __reduce__(self):
        return (open, (str(RAN), "w"))


@contextlib.contextmanager
def _scratch():
    with tempfile.TemporaryDirectory(prefix="cache-") as tmp:
        os.chmod(tmp, 0o700)
        yield Path(tmp)


def _expected_refusal(levels: list[tuple[int, bool, bool]]) -> bool:
    """The rule, restated: a folder above the cache may be written by others only with the sticky bit and is the
    caller's or root's; the cache folder itself (last) is the caller's and written by nobody else."""
    for i, (mode, sticky, other_owner) in enumerate(levels):
        last = i == len(levels) - 1
        others_write = bool(mode & 0o022)
        if other_owner or (others_write and (last or not sticky)):
            return True
    return False


LEVEL = st.tuples(
    st.integers(min_value=0o500, max_value=0o777).map(lambda m: m | 0o700),  # the caller can always walk it
    st.booleans(),  # sticky
    st.booleans() if ROOT_USER else st.just(False),  # owned by another user
)


@SETTINGS
@given(levels=st.lists(LEVEL, min_size=1, max_size=3))
def test_a_folder_is_used_only_if_no_one_else_can_write_it_or_a_folder_above_it(levels):
    with _scratch() as top:
        folder = top
        for mode, sticky, other_owner in levels:
            folder = folder / f"d{len(folder.parts)}"
            folder.mkdir()
            os.chmod(folder, mode | (stat.S_ISVTX if sticky else 0))
            if other_owner:
                os.chown(folder, OTHER_UID, -1)
        refused = _expected_refusal(levels)
        try:
            opened = open_cache_folder(folder, "answers")
        except CacheFolderRefused as exc:
            assert refused, f"refused a safe folder: {exc}"
            assert str(folder) in str(exc) or any(str(p) in str(exc) for p in folder.parents)
            return
        opened.close()
        assert not refused, f"used a folder another user can write: {levels}"


def test_a_link_in_the_path_resolves_once_and_a_link_as_the_folder_to_anothers_folder_is_refused(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    (tmp_path / "via").symlink_to(mine)
    with cache_folder_open(tmp_path / "via", "derived") as folder:
        assert folder.path == mine.resolve() / "derived"
    if ROOT_USER:
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, OTHER_UID, -1)
        (tmp_path / "planted").symlink_to(theirs)
        with pytest.raises(CacheFolderRefused, match="owned by another user"):
            open_cache_folder(tmp_path / "planted")


def _plant(folder: Path, name: str, kind: str, key_path: Path) -> None:
    """Put a hostile ``kind`` of entry at ``folder / name``."""
    target = folder / name
    payload = pickle.dumps(_Planted())
    if kind == "pickle":
        target.write_bytes(payload)
    elif kind == "magic-forged-tag":
        target.write_bytes(b"VLC1" + os.urandom(32) + payload)
    elif kind == "link-to-genuine":  # a link to an entry the cache wrote elsewhere: not read through
        elsewhere = folder.parent / "elsewhere"
        elsewhere.mkdir(mode=0o700, exist_ok=True)
        with cache_folder_open(folder.parent, "elsewhere") as other:
            other.write(name, payload)
        target.symlink_to(elsewhere / name)
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "folder":
        target.mkdir()
    elif kind == "others-writable-genuine":
        with cache_folder_open(folder.parent, folder.name) as own:
            own.write(name, payload)
        os.chmod(target, 0o666)
    elif kind == "another-users-genuine":
        with cache_folder_open(folder.parent, folder.name) as own:
            own.write(name, payload)
        os.chown(target, OTHER_UID, -1)
    elif kind == "key-replaced-by-link":  # the key a link to a file the attacker knows: a new key is made
        secret = folder.parent / "known-key"
        secret.write_bytes(b"k" * 32)
        key_path.unlink()
        key_path.symlink_to(secret)
        import hashlib
        import hmac

        tag = hmac.new(b"k" * 32, name.encode() + b"\0" + payload, hashlib.sha256).digest()
        target.write_bytes(b"VLC1" + tag + payload)


PLANTED = [
    "pickle",
    "magic-forged-tag",
    "link-to-genuine",
    "fifo",
    "folder",
    "others-writable-genuine",
    "key-replaced-by-link",
]
if ROOT_USER:
    PLANTED.append("another-users-genuine")


@SETTINGS
@given(kind=st.sampled_from(PLANTED), name=st.from_regex(r"[0-9a-f]{8,64}\.pickle", fullmatch=True))
def test_nothing_planted_in_the_callers_own_folder_is_read_or_unpickled(kind, name):
    RAN.unlink(missing_ok=True)
    with _scratch() as top:
        with cache_folder_open(top, "derived"):
            pass  # made, with its key
        _plant(top / "derived", name, kind, top / KEY_NAME)
        with cache_folder_open(top, "derived") as folder:
            assert folder.read(name) is None, kind
            cache = DiskDerivedCache(folder, name)
            assert len(cache) == 0
        assert not RAN.exists(), f"a planted {kind} was unpickled"


@SETTINGS
@given(victim_mode=st.sampled_from([0o600, 0o400, 0o644]), data=st.binary(max_size=64))
def test_a_planted_link_is_replaced_never_written_through(victim_mode, data):
    with _scratch() as top:
        victim = top / "victim"
        victim.write_bytes(b"the caller's own secret file")
        os.chmod(victim, victim_mode)
        with cache_folder_open(top, "answers") as folder:
            (top / "answers" / "x.json").symlink_to(victim)
            folder.write("x.json", data)
            assert folder.read("x.json") == data
        assert victim.read_bytes() == b"the caller's own secret file"
        assert not (top / "answers" / "x.json").is_symlink()
        assert stat.S_IMODE((top / "answers" / "x.json").stat().st_mode) == 0o600


@given(name=st.one_of(st.text(max_size=40), st.sampled_from(["..", ".", "../x", "/etc/passwd", "a/b", "x\0y"])))
def test_an_entry_name_is_a_plain_name_inside_its_folder(name):
    with _scratch() as top, cache_folder_open(top, "answers") as folder:
        plain = name and name not in (".", "..") and "/" not in name and "\0" not in name
        if plain:
            folder.write(name, b"v")
            assert (top / "answers" / name).is_file() and folder.read(name) == b"v"
        else:
            with pytest.raises(CacheFolderRefused, match="not a plain file name"):
                folder.write(name, b"v")


CONTROL = st.sampled_from(
    [
        "\x1b]52;c;ZWNobyBvd25lZA==\x07",  # a clipboard write
        "\x1b]0;title\x1b\\",
        "\x1b[2K",  # line erasure
        "\x1b[1A",
        "\r",
        "\x08",
        "\x9b2K",
        "\x1bPdcs\x1b\\",
        "\x1b_apc\x1b\\",
        "\x1bc",  # reset
        "\x07",
        "\x1b]8;;http://x\x07",
    ]
)
TEXT = st.lists(st.one_of(st.text(alphabet=st.characters(blacklist_categories=["Cc"]), max_size=8), CONTROL))


def _acting(text: str) -> bool:
    """Whether ``text`` holds a control character a terminal acts on (a colour sequence aside)."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return any((ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F for c in text)


@given(parts=TEXT, colour=st.booleans())
def test_printed_text_carries_no_control_sequence_but_colours(parts, colour):
    text = "".join(parts)
    for keep in (False, True):
        out = strip_terminal_codes(("\x1b[31m" if colour else "") + text, keep_colour=keep)
        assert not _acting(out), repr(out)
        assert ("\x1b" in out) == (keep and colour)


@given(
    names=st.lists(
        st.one_of(st.sampled_from(["../x.html", "/tmp/abs.html", "a/../../b", "decision.html"]), st.text()),
        max_size=4,
    ),
    stdout=TEXT,
)
def test_a_kept_answer_gives_only_its_pages_files_and_no_control_sequence(names, stdout):
    files = {name: "<p>planted</p>" for name in names}
    payload = json.dumps({"stdout": "".join(stdout), "files": files}).encode()
    answer = kept_answer(payload)
    assert answer is not None
    printed, page = answer
    assert set(page) <= set(PAGE_FILES) and set(page) == set(files) & set(PAGE_FILES)
    assert not _acting(printed)


def test_a_kept_answer_with_hostile_names_writes_nothing_outside_its_page(tmp_path, monkeypatch, capsys):
    """Through the entry point: an authenticated answer (as if the cache had written it) naming traversal and absolute
    paths writes the page's own files only, inside the page's folder."""
    from verifylab import entry

    project, cache = tmp_path / "p", tmp_path / "cache"
    (project / "data").mkdir(parents=True)
    monkeypatch.chdir(project)
    monkeypatch.setenv("VERIFYLAB_CACHE", str(cache))
    argv = ["box", "--probe", "RUN", "--out", "page"]
    name = entry.answer_name(argv)
    assert name is not None
    escape = tmp_path / "escaped.html"
    files = {"../../escaped.html": "x", str(escape): "x", "decision.html": "<p>ok</p>", "decision.json": "{}"}
    with cache_folder_open(cache, "answers") as folder:
        folder.write(name, json.dumps({"stdout": "answer\x1b]52;c;eA==\x07\n", "files": files}).encode())
    monkeypatch.setattr(sys, "argv", ["verifylab", *argv])
    entry.main()
    assert capsys.readouterr().out == "answer\n"
    assert not escape.exists() and not (tmp_path / "escaped.html").exists()
    assert sorted(p.name for p in (project / "page").iterdir()) == sorted(PAGE_FILES)


def test_a_refused_cache_folder_is_said_once_and_the_command_runs_without_it(tmp_path, monkeypatch, capsys):
    from verifylab.store import derived_disk

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("VERIFYLAB_CACHE", str(shared))
    derived_disk._said.cache_clear()
    assert derived_disk.open_cache("derived") is None and derived_disk.open_cache("answers") is None
    err = capsys.readouterr().err
    assert err.count("not used") == 1 and "writable by others" in err and str(shared) in err
    assert not (shared / "derived").exists()
