"""``verifylab gates audit|apply|verify|revert|matrix``: the architecture and precondition gates."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from verifylab.cli._shared import ROOT_HELP, console, err_console, fail, gates_root, print_frame
from verifylab.errors import ParameterError, VerifylabError

gates_app = typer.Typer(
    help="Architecture gates that keep FlashInfer all-reduce fusion off (e.g. on SM120): audit, apply, verify, "
    "revert, and a version matrix.",
    no_args_is_help=True,
)


DEFAULT_MATRIX = Path("data/gates/gate_matrix.csv")


def _known(matrix: Path):
    """The files the audited matrix lists per version; None (and a note) when the default matrix is absent here."""
    from verifylab.gates.tree import known_gate_files

    if matrix == DEFAULT_MATRIX and not matrix.exists():
        err_console.print(f"note: no {matrix} here: the tree is checked without the audited file list", style="dim")
        return None
    return known_gate_files(matrix)


@gates_app.command("audit")
def gates_audit(
    root: Path | None = typer.Option(None, help=ROOT_HELP),
    arch: str = typer.Option("sm120", help="Target architecture (sm120 = RTX PRO 6000 / RTX 50 Blackwell)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable findings (+ sha256 of every file)."),
    matrix: Path = typer.Option(
        DEFAULT_MATRIX, help="The audited gate matrix: a tree missing a file it lists for its version is refused."
    ),
) -> None:
    """Find, by parsing the source, every gate on the fusion and symmetric-memory paths that admits
    SM90/SM100 but not ARCH; plus capability tables, FlashInfer's JIT arch list, the fusion batch limit and
    the non-architecture preconditions (multicast preflight, P2P, FlashInfer version). Writes nothing.

    Example: `verifylab gates audit --root /opt/venv/lib/python3.12/site-packages --json > audit.json`
    """
    from verifylab.gates import audit

    try:
        target = gates_root(root)
        with err_console.status(f"auditing {target} for {arch}"):
            result = audit(target, arch, _known(matrix))
    except VerifylabError as exc:
        raise fail(exc) from None
    if as_json:
        typer.echo(json.dumps({**result.to_json(), "verify_path": _verify_path_rows(target)}, indent=2))
        return
    table = Table(title=f"gates for sm{result.target} in {result.root} ({result.versions})")
    for col in ("status", "kind", "file:line", "function", "expression / note"):
        table.add_column(col, overflow="fold")
    for f in result.findings:
        colour = {"closed": "red", "open": "green"}.get(f.status, "yellow")
        table.add_row(  # text, not markup: an expression's "[...]" prints as written
            Text(f.status, style=colour),
            Text(f.kind),
            Text(f"{f.file}:{f.line}"),
            Text(f.function),
            Text(f.expression + (f"\n{f.note}" if f.note else "")),
        )
    console.print(table)
    console.print(
        f"{len(result.closed)} closed gate(s). A patched gate does not prove fusion runs: only fused "
        "kernels in a profile do (chapter 3)."
    )
    _print_verify_path(target)


def _print_verify_path(target: Path) -> None:
    """The verify path's gates of the tree (which attention backend and verify kernel run), or why none were read."""
    from verifylab.gates.verify_path import tree_verify_path, verify_path_summary

    try:
        frame = tree_verify_path(target)
    except VerifylabError as exc:
        err_console.print(f"verify path: not read ({exc})", style="dim", highlight=False, markup=False)
        return
    print_frame(verify_path_summary(frame), title=f"the verify path's gates in {target} (file:line)")


def _verify_path_rows(target: Path) -> list[dict] | str:
    """The verify path's rows of the tree for ``--json``, or why none were read."""
    from verifylab.gates.verify_path import tree_verify_path

    try:
        return tree_verify_path(target).to_dict("records")
    except VerifylabError as exc:
        return f"not read: {exc}"


@gates_app.command("apply")
def gates_apply(
    root: Path | None = typer.Option(None, help=ROOT_HELP),
    arch: str = typer.Option("sm120", help="Target architecture."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the unified diff and change nothing."),
    audit_json: Path | None = typer.Option(
        None, "--audit", help="An earlier `audit --json`: refuse if a file changed since."
    ),
    matrix: Path = typer.Option(
        DEFAULT_MATRIX, help="The audited gate matrix: a tree missing a file it lists for its version is refused."
    ),
) -> None:
    """Open the gates on the fusion and symmetric-memory paths: minimal edits in each file's own style
    (`or is_sm120_supported()`, `or _is_sm120_supported` + its module variable and import, `or
    get_platform().is_sm120`, a `12:` table entry, `12` in FlashInfer's JIT list). All files or none;
    backups and sha256 hashes go to ROOT/.verifylab-gates/. Applying twice changes nothing.

    Example: `verifylab gates apply --root site-packages --dry-run`
    """
    from verifylab.gates import apply

    try:
        expected = _audit_hashes(audit_json) if audit_json else None
        target = gates_root(root)
        with err_console.status(f"{'planning' if dry_run else 'opening'} the {arch} gates in {target}"):
            result = apply(target, arch, dry_run=dry_run, expected=expected, known=_known(matrix))
    except VerifylabError as exc:
        raise fail(exc) from None
    if result.diff:
        typer.echo(result.diff)
    for note in result.notes:
        console.print(f"- {note}", highlight=False)
    if not result.changed:
        console.print("nothing to change: no closed gate")
    elif dry_run:
        console.print(f"dry run: {len(result.changed)} file(s) would change; nothing written")
    else:
        console.print(f"patched {len(result.changed)} file(s); manifest {result.manifest}. Now: verifylab gates verify")


@gates_app.command("verify")
def gates_verify(
    root: Path | None = typer.Option(None, help=ROOT_HELP),
    arch: str = typer.Option("sm120", help="Target architecture."),
    matrix: Path = typer.Option(
        DEFAULT_MATRIX, help="The audited gate matrix: a tree missing a file it lists for its version is refused."
    ),
) -> None:
    """Check a patched tree: every patched file compiles, re-audit finds no closed gate, and each gate
    evaluates True when the platform predicates say ARCH (no GPU needed). Exit 1 when a check fails.

    Example: `verifylab gates verify --root site-packages`
    """
    from verifylab.gates import verify

    try:
        report = verify(gates_root(root), arch, _known(matrix))
    except VerifylabError as exc:
        raise fail(exc) from None
    for check in report.checks:
        mark = "[green]ok[/]" if check["ok"] else "[red]FAIL[/]"
        console.print(
            f"{mark} {escape(str(check['check']))} {escape(str(check.get('detail', '')))}", highlight=False, markup=True
        )
    if not report.ok:
        raise typer.Exit(code=1)


@gates_app.command("revert")
def gates_revert(
    root: Path | None = typer.Option(None, help=ROOT_HELP),
    forget: bool = typer.Option(
        False, "--forget", help="Drop verifylab's record without touching any file (after pip reinstalled/upgraded)."
    ),
) -> None:
    """Restore every patched file byte for byte, checked against the sha256 hashes in the manifest; also gets a
    tree out of an interrupted apply or revert (`verifylab gates status` says which state it is in).

    Example: `verifylab gates revert --root site-packages`
    """
    from verifylab.gates import revert

    try:
        restored = revert(gates_root(root), forget=forget)
    except VerifylabError as exc:
        raise fail(exc) from None
    if forget:
        console.print("verifylab's record dropped; no file was touched", highlight=False)
        return
    console.print(f"restored {len(restored)} file(s) byte-identical: " + ", ".join(restored), highlight=False)


@gates_app.command("status")
def gates_status(root: Path | None = typer.Option(None, help=ROOT_HELP)) -> None:
    """Say where the tree stands with verifylab's patch — clean, applied, interrupted (kill -9 in an apply or a
    revert), reinstalled or changed by pip — and the one command that gets out of it.

    Example: `verifylab gates status --root site-packages`
    """
    from verifylab.gates import check_root, tree_state

    try:
        target = gates_root(root)
        current = tree_state(target)
        if current.state == "clean":
            check_root(target)  # "clean" of a folder that holds no package (a typo in --root) would mislead
    except VerifylabError as exc:
        raise fail(exc) from None
    console.print(f"{current.state}: {current.detail}", highlight=False)
    if current.way_out:
        console.print(f"next: {current.way_out}", highlight=False)


@gates_app.command("matrix")
def gates_matrix(
    versions: str = typer.Option(
        "0.5.6,0.5.8,0.5.9,0.5.10,0.5.12,0.5.14,0.5.17,0.5.20,0.5.21,0.5.22,0.5.23",
        help="SGLang versions, comma-separated.",
    ),
    flashinfer_versions: str = typer.Option(
        "0.6.3,0.6.4,0.6.15.post1,0.6.17,0.6.18,0.7.0,0.7.2", help="FlashInfer versions (JIT gate), comma-separated."
    ),
    pairs: str = typer.Option(
        "0.5.9:0.6.4", help="Extra SGLang:FlashInfer pairs for the forensics (the case study ran 0.5.9 with 0.6.4)."
    ),
    verify_versions: str = typer.Option(
        "0.5.9,0.5.17,0.5.22,0.5.23",
        help="SGLang versions whose verify path is audited (with the FlashInfer each pins), comma-separated.",
    ),
    arch: str = typer.Option("sm120", help="Target architecture."),
    out: Path = typer.Option(Path("data/gates/gate_matrix.csv"), help="Where the version x gate table is stored."),
    cache: Path = typer.Option(Path(".cache"), help="Wheel cache (git-ignored)."),
) -> None:
    """Download the published wheels (`pip download --no-deps`), audit each and store the version x gate
    table: which versions need which patch; next to it the FlashInfer version each SGLang wheel pins
    (`flashinfer_pins.csv`) and, per pair, what in the wheels allows or blocks fusion on a PCIe SM120 box
    (`fusion_forensics.csv`: JIT arch list, SM12x guards, how the workspace is allocated, the multicast preflight),
    and every long option each SGLang server accepts (`sglang_flags.csv`, what a printed launch command may use),
    the environment variables each wheel reads (`sglang_env.csv`, what a printed command may set), each wheel's
    sha256 (`sglang_wheels.csv`) and the verify path's gates of --verify-versions (`verify_path.csv`: the default
    attention backend per model shape and GPU, the split-KV verify's conditions, FlashInfer MLA on SM120, the
    verify-related options, each with file and line).

    Example: `verifylab gates matrix --versions 0.5.8,0.5.9,0.5.23 --out data/gates/gate_matrix.csv`
    """
    from verifylab.csv_cells import csv_text
    from verifylab.gates.forensics import fusion_forensics
    from verifylab.gates.matrix import flashinfer_pins, gate_matrix, matrix_pivot
    from verifylab.gates.sglang_env import env_table
    from verifylab.gates.sglang_flags import flags_table
    from verifylab.gates.verify_path import verify_path_summary, verify_path_table
    from verifylab.iorw import atomic_write_text
    from verifylab.store.evidence import (
        FLASHINFER_PINS_FILE,
        FORENSICS_FILE,
        SGLANG_ENV_FILE,
        SGLANG_FLAGS_FILE,
        SGLANG_WHEELS_FILE,
        VERIFY_PATH_FILE,
    )

    wanted = {
        "sglang": [v for v in versions.split(",") if v],
        "flashinfer": [v for v in flashinfer_versions.split(",") if v],
    }
    try:
        if out.is_dir() or (out.exists() and not out.is_file()):  # known now, not after minutes of downloads
            raise ParameterError(f"--out {out}: not a file; give the table's file name, e.g. {out / 'gate_matrix.csv'}")
        with console.status("auditing") as status:
            frame = gate_matrix(wanted, cache, arch, progress=lambda what: status.update(f"auditing {what}"))
            pins = flashinfer_pins(wanted["sglang"], cache)
            extra = [p.split(":", 1) for p in pairs.split(",") if ":" in p]
            status.update("reading the wheels for the fusion forensics")
            forensics = fusion_forensics(frame, pins, cache, extra_pairs=[(s, f) for s, f in extra])
            status.update("reading each server's options")
            flags = flags_table(wanted["sglang"], cache / "wheels")  # the wheels gate_matrix fetched
            status.update("reading the environment variables each wheel reads")
            env, wheels = env_table(wanted["sglang"], cache / "wheels")
            status.update("reading the verify path of each wheel")
            verify = verify_path_table([v for v in verify_versions.split(",") if v], cache / "wheels")
        atomic_write_text(out, csv_text(frame, lineterminator="\n"))
        for name, table in (
            (FLASHINFER_PINS_FILE.name, pins),
            (FORENSICS_FILE.name, forensics),
            (SGLANG_FLAGS_FILE.name, flags),
            (SGLANG_ENV_FILE.name, env),
            (SGLANG_WHEELS_FILE.name, wheels),
            (VERIFY_PATH_FILE.name, verify),
        ):
            atomic_write_text(out.with_name(name), csv_text(table, lineterminator="\n"))
    except VerifylabError as exc:
        raise fail(exc) from None
    print_frame(matrix_pivot(frame), title=f"gates for {arch} by version (stored in {out})")
    stored = out.with_name(VERIFY_PATH_FILE.name)
    print_frame(verify_path_summary(verify), title=f"the verify path's gates (stored in {stored})")


def _audit_hashes(path: Path) -> dict[str, str]:
    """The sha256 table of an earlier ``gates audit --json``; anything else is one line naming the file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParameterError(f"--audit {path}: not an audit --json file ({exc})") from None
    hashes = doc.get("sha256") if isinstance(doc, dict) else None
    if not isinstance(hashes, dict) or not all(isinstance(v, str) for v in hashes.values()):
        raise ParameterError(f"--audit {path}: not an audit --json file (no 'sha256' table of file -> hash)")
    return hashes
