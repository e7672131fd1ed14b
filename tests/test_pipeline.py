"""Editions, exports and the one-command pipeline, on throwaway copies of the project."""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from verifylab.analysis.recommendation import Topic
from verifylab.errors import ParameterError, ReferenceDataError
from verifylab.publish.build import BookResult, publish_book
from verifylab.publish.edition import changes_since, write_generated_pages
from verifylab.publish.finding import Finding, FindingKey
from verifylab.publish.pipeline import PipelineParams, load_params, run_pipeline
from verifylab.publish.registry import load_registry
from verifylab.store.digests import data_digest
from verifylab.store.evidence import Evidence

from .projects import project_copy, write_params

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def editions(smoke_run, tmp_path_factory):
    """Two editions: the session's build (a copy, so the session's book stays as it is) and one more after a
    data file was added, published as ``make book`` publishes (``publish_book``: render, archive, PDFs) from the
    session's executed chapters: the book is executed once per test session."""
    session_root, result = smoke_run
    assert result.exit_code == 0, result.output
    root = tmp_path_factory.mktemp("project") / "p"
    shutil.copytree(session_root, root)
    again = json.loads((root / "_build" / "editions" / "editions.json").read_text())[-1]  # as rendered
    first = write_generated_pages(root, Evidence(root / "data"))  # the same inputs' edition, computed without rendering
    extra = root / "data" / "reference" / "extra_note.csv"
    extra.write_text("figure,value\nnew,1\n")
    changed = publish_book(root, root / "data", BookResult()).edition
    return root, first, again, changed


def test_same_inputs_same_edition_and_new_data_new_edition(editions):
    root, first, again, changed = editions
    assert first["id"] == again["id"]
    assert changed["id"] != first["id"]
    index = (root / "_build" / "editions" / "index.html").read_text()
    assert first["id"] in index and changed["id"] in index
    listed = json.loads((root / "_build" / "editions" / "editions.json").read_text())
    assert [e["id"] for e in listed] == [first["id"], changed["id"]]
    assert (root / "_build" / "editions" / first["id"] / "index.html").is_file()
    page = (root / "_build" / "html" / "book" / "_generated" / "04_fusion_vs_elimination.html").read_text()
    assert f"Edition <code>{changed['id']}</code>" in page  # _build/html holds the latest edition


def test_exports_open(editions):
    root, _, _, changed = editions
    folder = root / "_build" / "editions" / changed["id"] / "exports"
    index = json.loads((folder / "exports.json").read_text())
    names = {e["name"] for e in index}
    assert {"fig-reported-throughput", "fig-whatif-components", "tbl-fusion-options", "tbl-recommendations"} <= names
    for entry in index:
        assert entry["edition"] == changed["id"]
        for name in entry["files"]:
            path = folder / name
            if name.endswith(".svg"):
                root_el = ET.fromstring(path.read_text())
                assert root_el.tag.endswith("svg")
                assert changed["id"] in path.read_text()  # captioned with the edition
            elif name.endswith(".png"):
                data = path.read_bytes()
                assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
            else:
                rows = list(csv.reader(path.open()))
                assert len(rows) >= 2


def test_make_book_prints_the_decision_and_every_chapter_to_pdf(editions):
    from pypdf import PdfReader

    root, _, _, changed = editions
    folder = root / "_build" / "editions" / changed["id"] / "exports" / "pdf"
    pdfs = {p.stem: p for p in folder.glob("*.pdf")}
    assert set(pdfs) >= {"decision", "01_environment_and_gates", "04_fusion_vs_elimination", "05_recommendations"}
    text = " ".join(page.extract_text() for page in PdfReader(pdfs["decision"]).pages)
    assert "The decision" in text and changed["id"] in text
    assert "Fusion vs elimination" in PdfReader(pdfs["04_fusion_vs_elimination"]).pages[0].extract_text()


def test_publish_registers_and_changes_page_compares(editions):
    root, first, _, _changed = editions
    from verifylab.publish.registry import publish

    before = json.loads((root / "book" / "editions.json").read_text())
    publish(root, first)
    registry = json.loads((root / "book" / "editions.json").read_text())
    assert registry[-1]["id"] == first["id"] and "key_findings" in registry[-1]
    assert [e for e in registry if e["id"] != first["id"]] == [e for e in before if e["id"] != first["id"]]
    current = write_generated_pages(root, Evidence(root / "data"))
    assert current["previous"] == first["id"]
    assert f"Compared with edition `{first['id']}`" in (root / "book" / "_generated" / "changes.md").read_text()


def _finding(key: FindingKey, value: float) -> Finding:
    return Finding(key=key, label=f"label of {key.value}", value=value, unit="ms", provenance="modelled")


def test_changes_since_compares_typed_findings_by_key():
    kept, changed, gone, new = (
        FindingKey.VERIFY_ALLREDUCE_US,
        FindingKey.KERNEL_FUSION_SHARE_MS,
        FindingKey.H200_COMPUTE_K1_MS,
        FindingKey.H200_COMPUTE_K16_MS,
    )
    before = [_finding(kept, 1), _finding(changed, 2), _finding(gone, 3)]
    relabelled = _finding(kept, 1).model_copy(update={"label": "same number, new words"})
    frame = changes_since({"key_findings": before}, [relabelled, _finding(changed, 5), _finding(new, 7)])
    assert sorted(frame["finding"]) == sorted(f"label of {k.value}" for k in (changed, gone, new))


def test_the_committed_registry_holds_typed_findings(repo_root):
    raw = json.loads((repo_root / "book" / "editions.json").read_text())
    for edition in raw:
        assert isinstance(edition["key_findings"], list)
        for finding in edition["key_findings"]:
            Finding.model_validate(finding)  # an enum key, the value as a field


def test_an_untyped_registry_is_read_by_key_and_an_unknown_label_is_named(tmp_path):
    legacy = {"kernel-fusion share (ms)": 2.22, "recommendation: speculation vs load": "[low] Route by load."}
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "editions.json").write_text(json.dumps([{"id": "old", "key_findings": legacy}]))
    found = {f.key: f for f in load_registry(tmp_path)[0]["key_findings"]}
    assert found[FindingKey.KERNEL_FUSION_SHARE_MS].value == 2.22
    assert found[Topic.SPECULATION].confidence == "low" and found[Topic.SPECULATION].value == "Route by load."
    legacy["a sentence nobody keyed"] = 1
    (tmp_path / "book" / "editions.json").write_text(json.dumps([{"id": "old", "key_findings": legacy}]))
    with pytest.raises(ReferenceDataError, match="a sentence nobody keyed"):
        load_registry(tmp_path)


def test_data_digest_depends_on_content_and_names(tmp_path):
    (tmp_path / "x.csv").write_text("1")
    d1 = data_digest(tmp_path)
    (tmp_path / "x.csv").write_text("2")
    assert data_digest(tmp_path) != d1


def test_smoke_params_replay_end_to_end(smoke_run):
    """`verifylab run --params examples/params-smoke.yaml` in replay mode renders the book (the session's build)."""
    root, result = smoke_run
    assert result.exit_code == 0, result.output
    assert (root / "_build" / "html" / "index.html").is_file()


def test_live_pipeline_against_the_test_server_records_a_failing_chapter(repo_root, tmp_path):
    from .test_bench import free_port

    root = project_copy(repo_root, tmp_path / "p", runs=False)  # the live chapters' runs only
    launcher = [sys.executable, "-m", "verifylab.testing.server"]
    params = {
        "mode": "live",
        "data_dir": "data",
        "run_id": "20261129-000000-live-test-double",
        "chapters": {
            "02_benchmarks": {
                "model_path": "tiny",
                "draft_model_path": None,
                "tp_size": 1,
                "port": free_port(),
                "launcher": launcher,
                "extra_args": ["--step-ms", "2"],
                "variants": ["ngram"],  # several variants in one campaign: the split-run test
                "runs": 2,
                "warmup": 0,
                "max_tokens": 16,
                "concurrency": [1, 2],
                "sweep_tokens": 16,
                "label": "test double (not data)",
            },
            "05_recommendations": {"launcher": launcher, "model_path": "tiny", "tp_size": 1},
        },
    }
    from verifylab.server.launch import Server

    port = free_port()  # a running "server" for chapter 03's live profile
    profiled = Server(
        [*launcher, "--port", str(port), "--tp-size", "2", "--step-ms", "2"], "127.0.0.1", port, tmp_path / "s.log"
    )
    profiled.start(health_timeout_s=60)
    params["chapters"]["03_verify_breakdown"] = {
        "server_url": profiled.url,
        "profile_steps": 2,
        "label": "test double (not data)",
    }
    path = tmp_path / "params.yaml"
    write_params(path, params)
    try:
        # chapters 01-03: the failing one and the two live ones (the failure page's HTML: tests/faults/test_injection)
        result = run_pipeline(root, load_params(path), only=["01", "02", "03"], render=False)
    finally:
        profiled.stop()
    status = {c.name: c.ok for c in result.chapters}
    assert status["01_environment_and_gates"] is False  # no sglang installed here: recorded, not fatal
    assert all(ok for name, ok in status.items() if name != "01_environment_and_gates")
    failed_page = (root / "book" / "_generated" / "01_environment_and_gates.ipynb").read_text()
    assert "This chapter failed in this run" in failed_page  # the page the render will show
    runs = root / "data" / "runs" / "20261129-000000-live-test-double"
    manifest = json.loads((runs / "manifest.json").read_text())
    assert {"single_stream", "sweep_cells", "variant_state", "trace_steps"} <= set(manifest["tables"])
    assert not (repo_root / "data" / "runs" / "20261129-000000-live-test-double").exists()


def test_bad_params_file_is_named(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("mode: sideways\n")
    with pytest.raises(Exception, match=r"p\.yaml: parameter 'mode' = 'sideways'"):
        load_params(path)
    path.write_text("mode: replay\nunknown_key: 1\n")
    with pytest.raises(Exception, match="unknown_key"):
        load_params(path)
    assert PipelineParams().mode == "replay"


def tp2_params(launcher: list[str], ports: tuple[int, int], simulate: bool = False) -> dict:
    server = {
        "model_path": "tiny",
        "draft_model_path": "tiny-draft",
        "tp_size": 2,
        "launcher": launcher,
        "extra_args": ["--step-ms", "2"],  # the test double's decode step: fast, the checks stay the same
    }
    return {
        "mode": "live",
        "data_dir": "data",
        "run_id": "20261130-000000-live-tp2-test-double",
        "parameters": {"label": "test double (not data)", "simulate_no_multicast": simulate, "campaign": "live-tp2"},
        "chapters": {
            "02_benchmarks": {
                **server,
                "port": ports[0],
                "variants": ["baseline", "fusion", "eagle3_fusion"],
                "runs": 1,
                "warmup": 0,
                "max_tokens": 16,
                "concurrency": [1],
                "sweep_tokens": 16,
            },
            "03_verify_breakdown": {
                **server,
                "port": ports[1],
                "profile_variants": ["baseline", "eagle3_fusion"],
                "profile_steps": 2,
            },
        },
    }


def test_live_tp2_split_run_proves_fusion_from_log_and_kernels(repo_root, tmp_path):
    """The live TP-2 campaign as the GPU box runs it (chapters 02 and 03 only, no render), against the test
    double: fusion in effect read from the server log, fused kernels counted per target pass."""
    from .test_bench import free_port

    root = project_copy(repo_root, tmp_path / "p", runs=False)  # the live chapters' runs only
    helps = tmp_path / "help-calls"  # each chapter reads the launcher's --help once, whatever its variants
    launcher = [
        "sh",
        "-c",
        f'case " $* " in *" --help "*) echo >> {shlex.quote(str(helps))};; esac; '
        f'exec {shlex.quote(sys.executable)} -m verifylab.testing.server "$@"',
        "launcher",
    ]
    path = tmp_path / "params.yaml"
    write_params(path, tp2_params(launcher, (free_port(), free_port())))
    result = run_pipeline(root, load_params(path), only=["02", "03_verify_breakdown"], render=False)
    assert [c.name for c in result.chapters] == ["02_benchmarks", "03_verify_breakdown"]
    assert all(c.ok for c in result.chapters), [c.error for c in result.chapters]
    assert result.index_html is None  # not rendered
    run = root / "data" / "runs" / "20261130-000000-live-tp2-test-double"
    assert json.loads((run / "manifest.json").read_text())["campaign"] == "live-tp2"  # how the book finds it
    states = {r["variant"]: r for r in csv.DictReader((run / "variant_state.csv").open())}
    assert {v: (s["fusion"], s["active"]) for v, s in states.items()} == {
        "baseline": ("off", "True"),
        "fusion": ("enabled", "True"),
        "eagle3_fusion": ("enabled", "True"),
    }
    assert all(s["multicast_guard"] == "True" for s in states.values())  # the server loaded the guard
    kernels = list(csv.DictReader((run / "allreduce_kernels.csv").open()))
    per_pass = {(r["variant"], r["impl"]): float(r["per_pass"]) for r in kernels if r["phase"] == "target"}
    # the test double's two layers: fused, every all-reduce but the last MLP one is FlashInfer's kernel
    assert per_pass == {
        ("baseline", "nccl"): 4.0,
        ("eagle3_fusion", "flashinfer_fused"): 3.0,
        ("eagle3_fusion", "nccl"): 1.0,
    }
    assert {r["variant"] for r in csv.DictReader((run / "trace_kernels.csv").open())} == {"baseline", "eagle3_fusion"}
    assert len(helps.read_text().splitlines()) == 2  # chapter 02's three variants, chapter 03's two


def test_live_tp2_simulated_pcie_marks_fusion_skipped(repo_root, tmp_path):
    from .test_bench import free_port

    root = project_copy(repo_root, tmp_path / "p", runs=False)  # the live chapters' runs only
    launcher = [sys.executable, "-m", "verifylab.testing.server"]
    params = tp2_params(launcher, (free_port(), free_port()), simulate=True)
    params["chapters"]["02_benchmarks"]["variants"] = ["fusion"]
    path = tmp_path / "params.yaml"
    write_params(path, params)
    result = run_pipeline(root, load_params(path), only=["02"], render=False)
    assert result.chapters[0].ok, result.chapters[0].error
    run = root / "data" / "runs" / "20261130-000000-live-tp2-test-double"
    (state,) = list(csv.DictReader((run / "variant_state.csv").open()))
    assert state["fusion"] == "skipped" and state["active"] == "False"
    assert "skipped" in state["inactive_reasons"]


def test_only_names_an_unknown_chapter(repo_root, tmp_path):

    with pytest.raises(ParameterError, match="--only: no chapter '07'; chapters are 00_introduction"):
        run_pipeline(repo_root, PipelineParams(), only=["07"], render=False)


@pytest.mark.parametrize("name", ["params.yaml", "params-pcie-sim.yaml"])
def test_live_tp2_params_files_load(repo_root, name):
    params = load_params(repo_root / "benchmarks" / "live_tp2" / name)
    assert params.mode == "live" and params.chapters["02_benchmarks"]["tp_size"] == 2
    assert params.chapters["02_benchmarks"]["mechanics_only"] is True


def test_a_run_prints_progress_and_outcomes_not_the_kernels_log(repo_root, tmp_path):
    """`verifylab run` as a user sees it (a real terminal's stderr, not CliRunner's): the chapters' outcomes, no
    "[IPKernelApp] WARNING" about TCP transport or "KeyboardInterrupt caught in kernel" from papermill's shutdown."""
    import subprocess

    root = project_copy(repo_root, tmp_path / "p")
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"mode": "replay", "parameters": {"label": "shared by 02 and 03 only"}}))
    cmd = [sys.executable, "-m", "verifylab.cli", "run", "--params", str(params), "--root", str(root), "--only", "00"]
    proc = subprocess.run([*cmd, "--no-render"], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "00_introduction: ok" in proc.stdout + proc.stderr
    assert "IPKernelApp" not in proc.stdout + proc.stderr


def test_a_render_after_only_replays_the_chapters_never_executed(repo_root, tmp_path):
    """A campaign split with --only: before the render, chapters with no executed copy are replayed from data/
    (marked as such) instead of leaving the book's table of contents pointing at missing pages."""
    from verifylab.publish.build import chapter_sources
    from verifylab.publish.pages import source_pages
    from verifylab.publish.paths import GENERATED
    from verifylab.publish.pipeline import replay_missing_chapters

    root = project_copy(repo_root, tmp_path / "p")
    generated = root / GENERATED
    generated.mkdir(parents=True)
    executed = {
        "00_introduction",
        "02_benchmarks",
        "03_verify_breakdown",
        "04_fusion_vs_elimination",
        "05_recommendations",
    }
    for name in executed:  # as a first call (--only 00,02,03,04,05 --no-render) leaves them
        (generated / f"{name}.ipynb").write_text("{}")
    params = PipelineParams(mode="live", parameters={"label": "2x H200"})
    replayed = replay_missing_chapters(root, params)
    assert [(c.name, c.ok, c.replayed) for c in replayed] == [("01_environment_and_gates", True, True)]
    written = {p.stem for p in generated.glob("*.ipynb")}
    assert {s.stem for s in chapter_sources(root)} == {stem for stem in written if "-" not in stem}
    assert set(source_pages(root / "notebooks" / "01_environment_and_gates.py")) <= written  # each of its pages
    assert all((generated / f"{name}.ipynb").read_text() == "{}" for name in executed)  # left as they were


def test_make_book_stops_at_a_failing_chapter_and_publishes_nothing(repo_root, tmp_path):
    """``verifylab book`` (``make book``): the chapters run, the first failure ends it in one line, no edition."""
    from typer.testing import CliRunner

    from verifylab.cli import app

    root = project_copy(repo_root, tmp_path / "p")
    for notebook in (root / "notebooks").glob("*.py"):  # every chapter fails as soon as it has its evidence
        broken = notebook.read_text().replace(
            "ev = params.evidence()\n", 'ev = params.evidence()\nraise RuntimeError("a broken chapter")\n'
        )
        notebook.write_text(broken)
    result = CliRunner().invoke(app, ["book", "--root", str(root)])
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "chapter 00_introduction failed" in errors[0] and "a broken chapter" in errors[0]
    assert not (root / "_build" / "editions").exists()
    from verifylab.publish.build import REPLAY_WORKERS
    from verifylab.publish.paths import GENERATED

    started = sorted(p.name for p in (root / GENERATED).glob("*.failed.ipynb"))  # each chapter that ran failed
    assert 1 <= len(started) <= REPLAY_WORKERS, started  # after the first failure no chapter started


def test_jupyter_book_build_from_the_root_renders_the_same_book(smoke_run, tmp_path):
    """A Jupyter Book user's own command, ``jupyter-book build .`` at the root, reads the committed ``_toc.yml`` and
    renders the pages `verifylab book` rendered (#54 item 1)."""
    import subprocess
    import sys

    root, result = smoke_run
    assert result.exit_code == 0, result.output
    command = [sys.executable, "-c", "import sys; from jupyter_book.cli.main import main; sys.exit(main())"]
    done = subprocess.run(
        [*command, "build", ".", "--path-output", str(tmp_path), "--quiet"],
        cwd=root, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    def pages(html: Path) -> set[str]:
        return {p.relative_to(html).as_posix() for p in html.rglob("*.html")}

    assert pages(tmp_path / "_build" / "html") == pages(root / "_build" / "html")


def test_the_newest_registered_edition_names_its_toolchain_and_runs(repo_root):
    """#54: the committed registry's newest edition can be cited in a review: it names the data it was built from,
    its commit and the rendering toolchain (Jupyter Book, MyST-NB, Altair...), and every run it shows is stored."""
    import json

    editions = json.loads((repo_root / "book" / "editions.json").read_text(encoding="utf-8"))
    newest = editions[-1]
    assert {"jupyter-book", "myst-nb", "altair"} <= set(newest.get("toolchain", {})), newest.get("toolchain")
    assert newest["commit"] != "nogit" and len(newest["data_digest"]) == 64
    stored = {p.name for p in (repo_root / "data" / "runs").iterdir() if (p / "manifest.json").is_file()}
    assert set(newest["runs"]) <= stored
