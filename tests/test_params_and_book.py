import re
from pathlib import Path

import pytest

from verifylab.chapters.registry import CHAPTER_PARAMS, chapter_parameters
from verifylab.errors import ParameterError
from verifylab.launch import SglangLaunch
from verifylab.publish.build import execute_chapter

# A --help that lists every option a launch can take (the builder refuses any other)
EVERY_FLAG = " ".join(
    [
        str((f.json_schema_extra or {}).get("flag"))
        for f in SglangLaunch.model_fields.values()
        if isinstance(f.json_schema_extra, dict)
    ]
    + ["--flashinfer-allreduce-fusion-backend", "--enforce-disable-flashinfer-allreduce-fusion"]
)


def test_invalid_mode_names_parameter_and_allowed_values(repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    with pytest.raises(ParameterError) as info:
        chapter_parameters("02_benchmarks", mode="livee")
    message = str(info.value)
    assert "\n" not in message
    assert "02_benchmarks: parameter 'mode' = 'livee'" in message
    assert "'replay' or 'live'" in message


def test_missing_data_dir_is_named(tmp_path):
    with pytest.raises(ParameterError, match=r"parameter 'data_dir'.*does not exist"):
        chapter_parameters("00_introduction", data_dir=tmp_path / "nope")


@pytest.mark.parametrize(
    ("chapter", "name"), [(chapter, name) for chapter, model in CHAPTER_PARAMS.items() for name in model.model_fields]
)
def test_a_wrong_type_in_any_parameter_of_any_chapter_is_one_line_naming_it(repo_root, monkeypatch, chapter, name):
    monkeypatch.chdir(repo_root)
    with pytest.raises(ParameterError) as info:
        chapter_parameters(chapter, **{name: {"not": "valid"}})
    message = str(info.value)
    # a parameter that is itself a group of settings (chapter 02's speculation grid) names the setting inside it
    assert "\n" not in message and re.match(rf"{chapter}: parameter '{name}(\.[a-z_]+)?'", message), message


@pytest.mark.slow  # starts processes (ranks, servers) or kills them: make test
def test_invalid_notebook_parameter_fails_the_chapter_with_one_line(repo_root, tmp_path):
    source = repo_root / "notebooks" / "00_introduction.py"
    out = tmp_path / "00_introduction.ipynb"
    heard: list[tuple[int, int]] = []
    result = execute_chapter(
        source, out, {"mode": "bogus", "data_dir": "data"}, repo_root, lambda done, total: heard.append((done, total))
    )
    assert not result.ok
    assert heard and heard[-1][0] < heard[-1][1]  # every finished cell was reported, up to the failing one
    assert result.error.startswith("ParameterError: 00_introduction: parameter 'mode' = 'bogus'")
    assert not out.exists()  # nothing half-written where the book reads


def test_book_has_every_chapter_and_no_network_reference(built_book: Path):
    html_files = list(built_book.rglob("*.html"))
    names = {p.stem for p in html_files}
    from verifylab.chapters.registry import APPENDIX
    from verifylab.publish.pages import book_pages

    for chapter in [*book_pages(Path(__file__).resolve().parents[1]), *(Path(page).name for page in APPENDIX)]:
        assert chapter in names, f"{chapter} has no page in the built book"
    remote = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", re.I)
    for page in html_files:
        text = page.read_text(encoding="utf-8")
        for match in remote.finditer(text):
            tag_start = text.rfind("<", 0, match.start())
            tag = text[tag_start : match.end()]
            # plain hyperlinks (<a href>) are fine; scripts, stylesheets, images and fonts are not
            assert tag.startswith("<a "), f"{page.name} loads from the network: {tag[:120]}"
    intro = (built_book / "book" / "_generated" / "00_introduction.html").read_text(encoding="utf-8")
    assert 'class="verifylab-chart"' in intro
    assert "<svg" in intro


def test_every_server_setting_reaches_the_launch_command():
    from verifylab.chapters.params import Benchmarks, VerifyBreakdown
    from verifylab.server.settings import LAUNCH_FIELDS
    from verifylab.server.variants import DEFAULT_VARIANTS, BaseConfig, variant_command

    assert set(LAUNCH_FIELDS) <= set(BaseConfig.model_fields)  # a setting the launcher does not take fails here
    for chapter in (Benchmarks, VerifyBreakdown):
        params = chapter.validated(model_path="/m", tp_size=2, mem_fraction_static=0.3, port=30001)
        args = variant_command(BaseConfig(**params.server_settings()), DEFAULT_VARIANTS["baseline"], EVERY_FLAG).args
        assert args[args.index("--mem-fraction-static") + 1] == "0.3"
        assert args[args.index("--tp-size") + 1] == "2" and args[args.index("--port") + 1] == "30001"
    with pytest.raises(ParameterError, match="mem_fraction_static"):
        Benchmarks.validated(mem_fraction_static=1.5)


def test_a_server_setting_declared_in_params_changes_what_is_started():
    """Every launch setting (``server.settings``), set to another value, changes the command SGLang is started
    with (or how it is started): a setting added there reaches the server with no other edit."""
    import types
    import typing

    from verifylab.chapters.params import Benchmarks
    from verifylab.server.settings import LAUNCH_FIELDS
    from verifylab.server.variants import DEFAULT_VARIANTS, BaseConfig, variant_command

    def sample(annotation):
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        for kind in typing.get_args(annotation) if union else (annotation,):
            if typing.get_origin(kind) is typing.Annotated:
                kind = typing.get_args(kind)[0]
            kind = typing.get_origin(kind) or kind
            for wanted, value in ((bool, True), (list, ["--other-flag"]), (float, 0.3), (int, 2), (str, "other_value")):
                if kind is wanted:
                    return value
        raise AssertionError(f"no sample value for {annotation}")

    def started(params) -> tuple:
        base = BaseConfig(**params.server_settings())
        command = variant_command(base, DEFAULT_VARIANTS["eagle3"], EVERY_FLAG + " --other-flag")
        return [*base.launcher, *command.args], base.simulate_no_multicast

    given = {"model_path": "/m", "draft_model_path": "/d"}
    default = started(Benchmarks.validated(**given))
    for name in ("model_path", *LAUNCH_FIELDS):
        changed = Benchmarks.validated(**given | {name: sample(Benchmarks.model_fields[name].annotation)})
        assert started(changed) != default, f"{name} never reaches the server"


def test_launch_defaults_have_one_source():
    """#44 item 1: the chapters' parameters, the variants' base configuration and `verifylab serve` take every
    launch default from ``server.settings``; the launcher is the running interpreter, never a bare ``python``."""
    import inspect
    import sys

    from verifylab.chapters.params import Benchmarks, VerifyBreakdown
    from verifylab.cli.bench import serve_cmd
    from verifylab.server.settings import LAUNCH_FIELDS, LaunchSettings
    from verifylab.server.variants import BaseConfig

    settings = LaunchSettings()
    for model in (Benchmarks.validated(), VerifyBreakdown.validated(), BaseConfig(model_path="/m")):
        assert {name: getattr(model, name) for name in LAUNCH_FIELDS} == settings.model_dump()
    assert settings.launcher[0] == sys.executable
    options = inspect.signature(serve_cmd).parameters
    for name in ("port", "draft_model_path", "mem_fraction_static", "attention_backend"):
        assert options[name].default.default == LaunchSettings.model_fields[name].default, name
        assert options[name].default.help == LaunchSettings.model_fields[name].description, name
    assert Benchmarks.validated(launcher=None).launcher == settings.launcher  # the notebook's stand-in


@pytest.mark.slow  # starts a kernel: make test
def test_a_chapter_kernel_listens_on_no_tcp_port_and_leaves_no_socket(tmp_path, monkeypatch):
    """The kernel's channels are Unix sockets in a folder of its own (a TCP port can be taken by a server started
    between jupyter_client choosing it and the kernel binding it); the folder goes with the kernel."""
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="k"))  # the session's temporary folder: a short path, as on a box
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    source = tmp_path / "09_transport.py"
    source.write_text(
        '# %% tags=["parameters"]\nlabel = ""\n\n# %%\n'
        "from ipykernel.connect import get_connection_info\n"
        'info = get_connection_info(unpack=True)\nprint(info["transport"], info["ip"])\n'
    )
    result = execute_chapter(source, tmp_path / "out" / "09_transport.ipynb", {"label": "x"}, tmp_path)
    assert result.ok, result.error
    printed = (tmp_path / "out" / "09_transport.ipynb").read_text()
    assert re.search(r"ipc [^\s\\]*vl-kernel-", printed), printed[-400:]
    assert re.search(rf"ipc {re.escape(str(short))}/vl-kernel-", printed)
    assert not list(short.glob("vl-kernel-*"))  # removed with the kernel
    short.rmdir()
