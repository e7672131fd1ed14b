"""#77's hostile book build: secrets of every shape the issue names, planted in every field of a run's manifest, in
a public row and in the environment of the build, reach none of the book's HTML, CSV, JSON, text or PDF outputs;
every run id, commit and commit-pinned URL of the shipped data still appears."""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path

import pytest
from pypdf import PdfReader
from typer.testing import CliRunner

from tests.projects import project_copy
from verifylab.cli import app
from verifylab.publish.pdf import chromium, print_pdfs

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # a whole book build

SECRETS = {
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAhostilekeybody\n-----END RSA PRIVATE KEY-----": "hostilekeybody",
    "redis://:hunter2hostile@cache:6379/0": "hunter2hostile",
    "AccountName=a;AccountKey=aG9zdGlsZWF6dXJla2V5MTIzNDU2;EndpointSuffix=x": "aG9zdGlsZWF6dXJla2V5",
    "aws_secret_access_key=wJalrXUtnFEMIhostileAWSKEYEXAMPLEKEY": "wJalrXUtnFEMIhostile",
    "https://hooks.slack.com/services/T0001/B0001/hostilewebhookpath01": "hostilewebhookpath01",
    "dckr_pat_hostile0123456789abcdefghij": "hostile0123456789abcdefghij",
    "ghp_hostile0123456789abcdefghijklmnopqrst": "hostile0123456789abcdefghijklmnopqrst",
}
RUN = "20261206-055842-h100-engine-context"


def _plant(root: Path) -> None:
    texts = list(SECRETS)
    manifest = root / "data" / "runs" / RUN / "manifest.json"
    data = json.loads(manifest.read_text())
    data["label"] = f"{data['label']} {texts[6]}"
    data["notes"] = [*data["notes"], *texts]
    data["parameters"] = {**data["parameters"], "hostile": texts}
    data["git_commit"] = f"{data['git_commit']} {texts[5]}"
    data["driver"], data["cuda"] = texts[1], texts[2]
    data["versions"] = {**data["versions"], "torch": texts[3], "extra": texts[4]}
    data["environment"] = {**data["environment"], "HF_TOKEN": texts[6], "SGLANG_API_KEY": texts[0]}
    manifest.write_text(json.dumps(data))
    public = root / "data" / "reference" / "public_measurements.csv"
    raw = public.read_bytes().decode("utf-8")
    rows = list(csv.reader(io.StringIO(raw)))
    header = rows[0]
    hostile = " ".join(texts).replace("\n", " ")
    rows[1][header.index("note")] = hostile
    rows[1][header.index("hardware")] = f"{rows[1][header.index('hardware')]} {texts[1]}"
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n" if "\r\n" in raw else "\n").writerows(rows)
    public.write_bytes(out.getvalue().encode("utf-8"))


def test_a_hostile_build_publishes_no_secret_and_keeps_every_provenance(tmp_path, monkeypatch):
    root = project_copy(ROOT, tmp_path / "book")
    _plant(root)
    monkeypatch.setenv("HF_TOKEN", list(SECRETS)[6])
    monkeypatch.setenv("SGLANG_API_KEY", list(SECRETS)[5])
    result = CliRunner().invoke(app, ["run", "--params", str(ROOT / "examples/params-smoke.yaml"), "--root", str(root)])
    assert result.exit_code == 0, result.output
    texts = [
        (path, path.read_text(errors="replace"))
        for path in (root / "_build").rglob("*")
        if path.is_file() and path.suffix in (".html", ".csv", ".json", ".txt", ".ipynb", ".js")
    ]
    assert texts
    printed = ["decision", "01_environment_and_gates-runs", f"runs/{RUN}"]  # where a manifest's fields are shown
    pdfs, why = print_pdfs(root / "_build" / "html", tmp_path / "pdf", printed)  # as `make book` prints its pages
    if chromium() is not None:
        assert len(pdfs) == len(printed), why
    for pdf in pdfs:  # a PDF's text is wrapped at its page's width: compared with its whitespace taken out
        text = "".join(page.extract_text() or "" for page in PdfReader(pdf).pages)
        texts.append((pdf, re.sub(r"\s+", "", text)))
    for secret in SECRETS.values():
        leaked = [str(p.relative_to(root)) for p, text in texts if secret in text]
        assert leaked == [], (secret, leaked[:5])
    everything = "\n".join(text for _, text in texts)
    assert RUN in everything
    for folder in (ROOT / "data" / "runs").iterdir():
        commit = json.loads((folder / "manifest.json").read_text()).get("git_commit") or ""
        for sha in re.findall(r"[0-9a-f]{7,40}", commit):
            assert sha in everything or folder.name not in everything, (folder.name, sha)
    pinned = re.findall(
        r"https://github\.com/[^\s\"'<>]+/blob/[0-9a-f]{40}/[^\s\"'<>]+",
        os.linesep.join(
            (ROOT / "data" / "reference" / name).read_text()
            for name in ("public_measurements.csv", "public_context.csv")
        ),
    )
    assert pinned and all(url.split("/blob/")[1][:40] in everything for url in pinned)
