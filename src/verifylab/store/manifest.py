"""A run's manifest: the schema of ``manifest.json`` (host, GPU, versions, parameters, tables, campaign), how one
is made for this host and read back (validated, naming the file and field), and when a run may be resumed."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from verifylab import vocab
from verifylab.errors import ManifestError, ParameterError, RunExistsError
from verifylab.host import HostInfo
from verifylab.intake import OutsideFileError, read_outside_text
from verifylab.iorw import file_exists
from verifylab.redact import redact_environment, redact_obj, redact_text, strip_terminal_codes
from verifylab.store.schema import SCHEMA_VERSION

RUN_ID_PATTERN = vocab.RUN_ID_PATTERN  # declared with the shared facts (a CLI checks it before heavy imports)
TABLE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
TABLE_FILE_PATTERN = r"[a-z0-9][a-z0-9_-]{0,63}\.(parquet|csv)"  # a plain file name inside the run folder
MANIFEST = "manifest.json"


SCHEMA_1_CAMPAIGNS = ("live-tp2", "pcie-sim-before", "pcie-sim-after", "live-smoke")


def campaign_in_run_id(run_id: str) -> str:
    """The campaign a schema-1 run id names (``20261130-080118-2xh200-live-tp2-eagle3`` -> ``live-tp2``), or ''."""
    return next((c for c in SCHEMA_1_CAMPAIGNS if f"-{c}" in run_id), "")


# Typed fields: a value of its type is kept as it is; any other text goes through the secret detector (its hashes and
# words kept, a credential of any shape redacted), so what reaches a page is a version, a number or detector-clean text
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+_-]{0,63}")  # 2.11.0+cu130, 0.6.15.post1, 13.0
_DOTTED = re.compile(r"[0-9]{1,6}(?:\.[0-9]{1,6}){0,3}")  # a driver (580.159.04) or a CUDA release (13.0)
_COMMIT = re.compile(r"[0-9a-f]{7,40}(?:-dirty)?")  # a git commit, as `git describe --dirty` may mark it


def typed_text(value: object, pattern: re.Pattern[str]) -> object:
    """``value`` if it is text of ``pattern``'s type (or not text), else the text with every secret redacted."""
    if not isinstance(value, str) or pattern.fullmatch(value):
        return value
    return redact_text(strip_terminal_codes(value))


class Versions(BaseModel):
    """Software versions that decide the results."""

    model_config = ConfigDict(extra="allow")

    torch: str | None = None
    sglang: str | None = None
    flashinfer: str | None = None
    nccl: str | None = None
    cuda: str | None = None
    verifylab: str | None = None

    @model_validator(mode="after")
    def _versions_or_redacted(self) -> Versions:
        for name, value in self.__dict__.items():
            object.__setattr__(self, name, typed_text(value, _VERSION))
        extra = self.model_extra or {}
        for name, value in extra.items():
            extra[name] = typed_text(value, _VERSION)
        return self


class Manifest(BaseModel):
    """The schema of ``manifest.json``. ``label`` is what every chart shows next to the numbers."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("git_commit")
    @classmethod
    def _commit_or_redacted(cls, value: object) -> object:
        return typed_text(value, _COMMIT)

    @field_validator("driver", "cuda")
    @classmethod
    def _dotted_or_redacted(cls, value: object) -> object:
        return typed_text(value, _DOTTED)

    schema_version: int = Field(SCHEMA_VERSION, strict=True, ge=1)  # "2" or 2.0 is refused: no guess at a schema
    run_id: str
    kind: Literal["measured"] = "measured"
    label: str = Field(min_length=3, description="hardware label shown with every figure, e.g. 'H200, SM90'")
    purpose: str = ""
    created: datetime
    host: str
    gpu_name: str | None
    compute_capability: str | None
    gpu_count: int = Field(ge=0)
    interconnect: str | None
    topology: str | None = None
    driver: str | None
    cuda: str | None
    versions: Versions
    parameters: dict[str, Any] = Field(default_factory=dict)
    git_commit: str | None
    environment: dict[str, str] = Field(default_factory=dict)
    tables: dict[str, str] = Field(default_factory=dict, description="table name -> file name")
    status: Literal["complete", "partial", "failed"] = "complete"
    mechanics_only: bool = Field(
        False, description="a run of the mechanism (tiny or random model): never evidence for a deployment"
    )
    test_double: bool = Field(
        False,
        description="measured against verifylab's test double (it says so on every answer): mechanics only, never "
        "evidence; set by the harness, refused as evidence by the book",
    )
    campaign: str = Field(
        "",
        description="the campaign the run belongs to (live-tp2, pcie-sim-before, live-smoke ...): how the book "
        "selects runs",
    )
    notes: list[str] = Field(default_factory=list)
    fleet: dict[str, str] = Field(
        default_factory=dict,
        description="where a fleet campaign measured it: host, its description, Ray node and job ids, campaign",
    )

    @model_validator(mode="after")
    def _a_test_double_is_never_evidence(self) -> Manifest:
        if self.test_double and not self.mechanics_only:
            raise ValueError("test_double is true but mechanics_only is not: a test double's run is never evidence")
        return self

    @model_validator(mode="after")
    def _no_credentials(self) -> Manifest:
        """Every manifest in memory is redacted by the one secret policy, however its file was written (an old,
        edited or unpacked one): a token in a label, note, parameter or variable never reaches a page or export."""
        self.label = redact_text(self.label)
        self.purpose = redact_text(self.purpose)
        self.host = redact_text(self.host)
        self.gpu_name, self.interconnect = (redact_text(v) if v else v for v in (self.gpu_name, self.interconnect))
        self.notes = [redact_text(note) for note in self.notes]
        self.parameters = redact_obj(self.parameters)
        self.environment = redact_environment(self.environment)
        self.fleet = {key: redact_text(value) for key, value in self.fleet.items()}
        return self

    @model_validator(mode="before")
    @classmethod
    def _campaign_of_schema_1(cls, data: Any) -> Any:
        """Schema 1 named a run's campaign in its id only (``device_run.sh``'s ``<time>-<gpu>-<campaign>``)."""
        version = data.get("schema_version", 1) if isinstance(data, dict) else None
        if type(version) is int and version < 2 and "campaign" not in data:  # a bool or a text is no schema
            data = {**data, "campaign": campaign_in_run_id(str(data.get("run_id", "")))}
        return data

    @field_validator("run_id")
    @classmethod
    def _check_run_id(cls, value: str) -> str:
        if not re.fullmatch(RUN_ID_PATTERN, value):
            raise ValueError(f"run_id {value!r} must match {RUN_ID_PATTERN} (lower case, digits, . _ -)")
        if value in vocab.RESERVED_RUN_IDS:
            raise ValueError(f"run_id {value!r} is the name of a page of the book: choose another")
        return value

    @field_validator("topology")
    @classmethod
    def _plain_topology(cls, value: str | None) -> str | None:
        """``nvidia-smi topo -m`` text without its terminal colour codes, however the run was captured."""
        return strip_terminal_codes(value) if value else value

    @field_validator("schema_version")
    @classmethod
    def _known_schema(cls, value: int) -> int:
        if value > SCHEMA_VERSION:
            raise ValueError(f"schema {value} is newer than this verifylab reads ({SCHEMA_VERSION}): upgrade verifylab")
        return value

    @field_validator("tables")
    @classmethod
    def _plain_table_files(cls, value: dict[str, str]) -> dict[str, str]:
        outside = {name: file for name, file in value.items() if not re.fullmatch(TABLE_FILE_PATTERN, file)}
        if outside:
            raise ValueError(f"tables {outside} must be plain file names inside the run folder (name.parquet|csv)")
        return value


def manifest_from_host(
    run_id: str, label: str, host: HostInfo, parameters: dict[str, Any] | None = None, purpose: str = ""
) -> Manifest:
    """A fresh manifest for a run made on ``host``; a bad run id or label is one line naming the field."""
    try:
        return _manifest_from_host(run_id, label, host, parameters, purpose)
    except ValidationError as exc:
        raise ParameterError(_format_validation(Path(f"run {run_id}"), exc)) from None


def _manifest_from_host(
    run_id: str, label: str, host: HostInfo, parameters: dict[str, Any] | None, purpose: str
) -> Manifest:
    return Manifest(
        run_id=run_id,
        label=label,
        purpose=purpose,
        created=datetime.now(UTC),
        host=host.host,
        gpu_name=host.gpu_name,
        compute_capability=host.compute_capability,
        gpu_count=host.gpu_count,
        interconnect=host.interconnect,
        topology=host.topology,
        driver=host.driver,
        cuda=host.cuda,
        versions=Versions(
            torch=host.versions.get("torch"),
            sglang=host.versions.get("sglang"),
            flashinfer=host.versions.get("flashinfer"),
            nccl=host.nccl,
            cuda=host.cuda,
            verifylab=host.versions.get("verifylab"),
        ),
        parameters=parameters or {},
        git_commit=host.git_commit,
        environment=host.environment,
        notes=list(host.notes),
    )


def check_resume(stored: Manifest, label: str, parameters: dict[str, Any]) -> None:
    """Refuse to resume ``stored`` with another label or another value of a parameter it records: its cells
    would be mixed with cells measured otherwise, under the first call's provenance."""
    if (label_shown := redact_text(label)) != stored.label:
        raise RunExistsError(
            f"run '{stored.run_id}' is labelled {stored.label!r}, this call {label_shown!r}: "
            "resume it with the same label, or measure into another run id"
        )
    for key in sorted(set(parameters) & set(stored.parameters)):
        if parameters[key] != stored.parameters[key]:
            shown = {"stored": stored.parameters[key], "now": parameters[key]}
            raise RunExistsError(
                f"run '{stored.run_id}' was measured with {key} = {json.dumps(shown['stored'], default=str)[:200]}, "
                f"this call has {json.dumps(shown['now'], default=str)[:200]}: resume it with the same parameters, "
                "or measure into another run id"
            )


def new_run_id(slug: str, now: datetime | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<slug>``: sortable by time, readable by purpose."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    clean = re.sub(r"[^a-z0-9._-]+", "-", slug.lower()).strip("-") or "run"
    return f"{stamp}-{clean}"[:96]


def _format_validation(path: Path, exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "(root)"
    more = len(exc.errors()) - 1
    message = redact_text(str(first["msg"]))  # a refused value may be a credential
    return f"{path}: field '{field}': {message}" + (f" (and {more} more)" if more else "")


MAX_JSON_DEPTH = 64  # a manifest nests a few levels (parameters of parameters); a deeper one is refused unread


def json_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in JSON ``text`` (strings skipped), found without parsing it: a
    parser recurses once per level, so depth is checked first."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def read_manifest(path: Path) -> Manifest:
    """Load and validate one manifest file; errors name the file and the field."""
    if not file_exists(path) and not path.exists() and not path.is_symlink():
        raise ManifestError(f"{path}: manifest missing")
    try:
        raw = read_outside_text(path, "manifest", root=path.parent)
    except OutsideFileError as exc:
        raise ManifestError(str(exc)) from None
    if (depth := json_depth(raw)) > MAX_JSON_DEPTH:
        raise ManifestError(f"{path}: nests {depth} levels deep (a manifest holds at most {MAX_JSON_DEPTH})")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: expected a JSON object, found {type(data).__name__}")
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(_format_validation(path, exc)) from exc
    if manifest.run_id != path.parent.name:
        raise ManifestError(f"{path}: field 'run_id' is {manifest.run_id!r} but the folder is {path.parent.name!r}")
    return manifest
