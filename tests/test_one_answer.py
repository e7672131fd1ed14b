"""#78, one answer per question: for the case study's box (Kimi-K2.5 INT4 over 8 x RTX PRO 6000, TP 8, healthy P2P,
EAGLE-3 with 4 draft tokens, the page's accept length), the question "up to how many streams does speculation pay?"
keyed by engine and context band has one answer on the rendered decision page, from ``model speculation`` and from
``box --plan`` at the four contexts of the bands; the model's answer per regime has one answer in the decision
page's export and ``model whatif``; ``box --probe`` and ``box --plan --probe`` give the same band for an 8-GPU probe of
that box (a test double in a scratch copy of the data folder: the probe measured no speculation, so the page's band
is its nearest evidence). A second computation planted in one command, a stream apart, is found."""

from __future__ import annotations

import html
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifylab.cli import app

ROOT = Path(__file__).resolve().parents[1]
KIMI = str(ROOT / "examples" / "configs" / "kimi-k2.5-int4")
CASE_BOX = ["--config", KIMI, "--gpu", "rtx-pro-6000", "--tp", "8", "--regime", "healthy-p2p"]
CONTEXTS = {1024: "short", 16384: "16k", 32768: "32k", 65536: "64k+"}  # the decision page's bands
ENGINES = {  # the decision page's line for each engine -> the options that name it
    "SGLang, attention backend triton": [],
    "SGLang, attention backend flashinfer": ["--attention-backend", "flashinfer"],
    "vLLM as the public matrix ran it": ["--engine", "vllm"],
}
Key = tuple[str, str]  # (engine, band)


def canonical(setting: str) -> str:
    """A band's answer as a value: ``off``, ``pays to the pool's N``, ``pays to N``, ``a-b`` or ``measure``."""
    setting = " ".join(setting.split())
    if found := re.match(r"EAGLE-3 off below (\d+(?:-\d+)?) streams \(it loses at one\), on from there (.*)", setting):
        return f"from {found.group(1)} " + canonical(f"EAGLE-3 on {found.group(2)}")
    if setting.startswith("EAGLE-3 off"):
        return "off"
    if found := re.match(r"EAGLE-3 on at every load the KV pool holds \((\d+) distinct streams\)", setting):
        return f"pays to the pool's {found.group(1)}"
    if found := re.match(
        r"EAGLE-3 on (?:at every load )?to (?:every load the evidence spans \()?(\d+) streams", setting
    ):
        return f"pays to {found.group(1)}"
    if found := re.match(r"EAGLE-3 on up to (\d+(?:-\d+)?) streams", setting):
        return found.group(1)
    if setting.startswith("measure first"):
        return "measure"
    raise AssertionError(f"not a band's answer: {setting!r}")


def page_bands(text: str) -> dict[Key, str]:
    """The decision page's answer per engine and band, from its lines 'ENGINE ...: short: ...; 16k: ...'."""
    found: dict[Key, str] = {}
    for line in text.splitlines():
        engine = next((e for e in ENGINES if line.startswith(e)), None)
        if engine is None:
            continue
        if grouped := re.search(
            r"EAGLE-3 on up to ((?:(?:short|16k|32k|64k\+) \d+(?:-\d+)?(?: streams)?, )+)off", line
        ):
            for band, span in re.findall(r"(short|16k|32k|64k\+) (\d+(?:-\d+)?)", grouped.group(1)):
                found[(engine, band)] = span
            continue
        for band, setting in re.findall(
            r"(short|16k|32k|64k\+): (EAGLE-3 [^;]*?|measure first[^;]*?)(?=; |\s\(public|\s\(modelled|\s\(measured|$)",
            line,
        ):
            found[(engine, band)] = canonical(setting)
    return found


def _page_text(built_book: Path) -> str:
    raw = (built_book / "book" / "_generated" / "decision.html").read_text(encoding="utf-8")
    raw = re.sub(r"<script.*?</script>|<style.*?</style>", "", raw, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", raw))
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


@pytest.fixture(scope="module")
def probe_data(tmp_path_factory) -> Path:
    """A scratch copy of the data folder holding an 8 x RTX PRO 6000 probe of the case box (a test double)."""
    import shutil

    from verifylab.testing.probe_double import write_probe_double

    data = tmp_path_factory.mktemp("probe-double") / "data"
    shutil.copytree(ROOT / "data", data)
    write_probe_double(data)
    return data


def _speculation_line(output: str) -> str:
    words = " ".join(output.split())
    found = re.search(r"speculation: (.*?) at [\d,]+ tokens of context", words)
    assert found, words
    return canonical(found.group(1))


def probe_bands(runner: CliRunner, data: Path, engines: dict[str, list[str]] = ENGINES) -> dict[str, dict[Key, str]]:
    """``box --probe`` (its speculation line) and ``box --plan --probe`` on the probe double, per engine and band."""
    from verifylab.testing.probe_double import RUN_ID

    out: dict[str, dict[Key, str]] = {"box --probe": {}, "box --plan --probe": {}}
    for engine, options in engines.items():
        for context, band in CONTEXTS.items():
            common = ["--config", KIMI, "--context", str(context), *options, "--data-dir", str(data)]
            probed = runner.invoke(app, ["box", "--probe", RUN_ID, "--decode-tok-s", "50", "--out",
                                         str(data.parent / "page"), *common])  # fmt: skip
            assert probed.exit_code == 0, probed.output
            out["box --probe"][(engine, band)] = _speculation_line(probed.output)
            planned = runner.invoke(app, ["box", "--plan", "--probe", RUN_ID, *common])
            assert planned.exit_code == 0, planned.output
            out["box --plan --probe"][(engine, band)] = _speculation_line(planned.output)
    return out


def command_bands(runner: CliRunner, engines: dict[str, list[str]] = ENGINES) -> dict[str, dict[Key, str]]:
    """``model speculation`` (its decision) and ``box --plan`` (its speculation line) per engine and band."""
    out: dict[str, dict[Key, str]] = {"model speculation": {}, "box --plan": {}}
    for engine, options in engines.items():
        for context, band in CONTEXTS.items():
            spec = runner.invoke(
                app, ["model", "speculation", *CASE_BOX, "--context", str(context), "--json", *options, "--data-dir",
                      str(ROOT / "data")],
            )  # fmt: skip
            assert spec.exit_code == 0, spec.output
            out["model speculation"][(engine, band)] = canonical(json.loads(spec.output)["decision"])
            plan = runner.invoke(
                app, ["box", "--plan", *CASE_BOX, "--context", str(context), *options, "--data-dir", str(ROOT / "data")]
            )
            assert plan.exit_code == 0, plan.output
            out["box --plan"][(engine, band)] = _speculation_line(plan.output)
    return out


def disagreements(sources: dict[str, dict[Key, str]]) -> dict[Key, dict[str, str]]:
    """The question keys given more than one answer, with each source's."""
    by_key: dict[Key, dict[str, str]] = defaultdict(dict)
    for source, answers in sources.items():
        for key, value in answers.items():
            by_key[key][source] = value
    return {key: given for key, given in by_key.items() if len(set(given.values())) > 1}


def test_one_value_per_question_key_across_the_page_and_the_commands(built_book, probe_data):
    runner = CliRunner()
    sources = {
        "decision page": page_bands(_page_text(built_book)),
        **command_bands(runner),
        **probe_bands(runner, probe_data),
    }
    assert len(sources["decision page"]) == len(ENGINES) * len(CONTEXTS), sources["decision page"]
    assert all(len(answers) == len(ENGINES) * len(CONTEXTS) for answers in sources.values())
    assert disagreements(sources) == {}


def test_a_second_computation_a_stream_apart_is_found(built_book, probe_data, monkeypatch):
    """The command's band computed again beside the page's, its crossover moved by one stream at each end."""
    from verifylab.model.answers import evidence_ladder, speculation_answer

    one_band = evidence_ladder.transfer_band

    def moved(*args, **kwargs):
        band = one_band(*args, **kwargs)
        low, high = band.stops
        stops = (None if low is None else low + 1, None if high is None else high + 1)
        return evidence_ladder.BandAnswer(**{**band.__dict__, "stops": stops})

    monkeypatch.setattr(speculation_answer, "transfer_band", moved)  # model speculation's, and box --probe's through it
    runner, default = CliRunner(), dict(list(ENGINES.items())[:1])  # SGLang's default backend: one engine suffices
    page = {key: value for key, value in page_bands(_page_text(built_book)).items() if key[0] in default}
    sources = {"decision page": page, **command_bands(runner, default), **probe_bands(runner, probe_data, default)}
    found = disagreements(sources)
    assert found and all(len(given) == len(sources) for given in found.values())
    for given in found.values():
        assert given["model speculation"] == given["box --probe"] != given["decision page"]
        assert given["decision page"] == given["box --plan"] == given["box --plan --probe"]


def test_the_models_answer_per_regime_is_one_on_the_page_and_in_whatif(built_book):
    """The model's EAGLE-3 answer on the case box per regime (TP 8, NCCL, the case's context): the decision page's
    regimes table as exported, and ``model whatif``."""
    exports = sorted((built_book.parent / "editions").glob("*/exports/*tbl-decision-regimes.data.csv"))
    assert exports, "the decision page's regimes table is exported"
    import pandas as pd

    page = pd.read_csv(exports[-1])
    cells = page[page["quantity"] == "speculation stops paying"].set_index("row_label")["shown"].to_dict()
    whatif = CliRunner().invoke(app, ["model", "whatif", "--json", "--data-dir", str(ROOT / "data")])
    assert whatif.exit_code == 0, whatif.output
    given = {r["regime"]: r["speculation_off_from"] for r in json.loads(whatif.output) if r["key"] == "tp8_nccl"}
    shared = set(cells) & set(given)
    assert len(shared) >= 3, (sorted(cells), sorted(given))
    assert {regime: cells[regime] for regime in shared} == {regime: given[regime] for regime in shared}


pytestmark = pytest.mark.slow  # the built book
