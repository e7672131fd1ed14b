"""The one SGLang launch command: a server's launch settings (:class:`SglangLaunch`, each field declaring the flag
it becomes, as vLLM's engine arguments generate their options from the config's fields) and the flags its SGLang
version accepts in, the command out (:func:`build_command`), every flag checked against that version first.

The version-dependent parts are here and nowhere else: the all-reduce a server runs (NCCL with FlashInfer's fusion
kept off where the version can auto-enable it, FlashInfer's fused all-reduce + RMSNorm on its ``trtllm`` workspace,
or SGLang's PCIe-IPC all-reduce switched on by its environment variable), and a flag a version spells otherwise.
``serve``, ``box``, ``box --plan``, the box check, chapter 5 and the decision page print what this builds
(``tests/test_one_builder.py`` holds every other module to it)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from verifylab.command_line import SGLANG, shell_command
from verifylab.errors import ParameterError
from verifylab.vocab import PCIE_IPC_FLASHINFER, PCIE_IPC_SGLANG, version_at_least, version_key

# The workspace backend verifylab asks for: 'trtllm' (P2P buffers, no multicast). Never 'mnnvl' or 'auto' (which
# may pick mnnvl): mnnvl creates NVLink multicast objects.
FUSION_BACKEND = "trtllm"
FUSION_BACKEND_FLAG = "--flashinfer-allreduce-fusion-backend"  # 0.5.14+ (the audited wheels' flags)
FUSION_FLAG = "--enable-flashinfer-allreduce-fusion"  # 0.5.9-0.5.22 (deprecated for the backend flag in 0.5.23)
FUSION_OFF_FLAG = "--enforce-disable-flashinfer-allreduce-fusion"  # 0.5.10+: some versions auto-enable fusion
NO_CUSTOM_ALLREDUCE = "--disable-custom-all-reduce"
PCIE_IPC_ENV = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"  # read by SGLang 0.5.21+ (pcie_ipc_ar.py), FlashInfer 0.7.0+


class LaunchError(ParameterError):
    """A launch the target SGLang cannot run: a flag its version does not accept, or settings that contradict."""


class AllReduce(StrEnum):
    """The all-reduce a server's tensor-parallel group runs."""

    NCCL = "nccl"  # SGLang's default path (its custom all-reduce where it allows it, NCCL on more PCIe GPUs)
    FUSED = "fused"  # FlashInfer's fused all-reduce + RMSNorm (trtllm workspace)
    PCIE_IPC = "pcie_ipc"  # SGLang's PCIe-IPC all-reduce (its environment variable)


def flag(name: str, default: Any = None, **kwargs: Any) -> Any:
    """A field that becomes ``name`` on the command line (a bool: the flag alone, when true; None: left out)."""
    return Field(default, json_schema_extra={"flag": name}, **kwargs)


class SglangLaunch(BaseModel):
    """One SGLang server as it is launched. A field with a ``flag`` is that option; the others say what the builder
    turns into version-dependent flags and environment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_path: str = flag("--model-path", "<model-path>")
    trust_remote_code: bool = flag("--trust-remote-code", False)
    tp_size: int = flag("--tp-size", 1, ge=1)
    host: str | None = flag("--host")
    port: int | None = flag("--port", ge=1, le=65535)
    mem_fraction_static: float | None = flag("--mem-fraction-static", gt=0, le=1)
    attention_backend: str | None = flag("--attention-backend", pattern=r"^[a-z0-9_]+$")
    kv_cache_dtype: str | None = flag("--kv-cache-dtype", pattern=r"^[a-z0-9_]+$")
    allreduce: AllReduce = AllReduce.NCCL  # its flags and environment depend on the version (:func:`build_command`)
    disable_custom_all_reduce: bool = flag(NO_CUSTOM_ALLREDUCE, False)
    max_running_requests: int | None = flag("--max-running-requests", ge=1)
    cuda_graph_max_bs: int | None = Field(None, ge=1)  # the version's decode CUDA-graph cap flag (build_command)
    speculative_algorithm: str | None = flag("--speculative-algorithm")
    speculative_draft_model_path: str | None = flag("--speculative-draft-model-path")
    speculative_num_steps: int | None = flag("--speculative-num-steps", ge=1)
    speculative_eagle_topk: int | None = flag("--speculative-eagle-topk", ge=1)
    speculative_num_draft_tokens: int | None = flag("--speculative-num-draft-tokens", ge=1)
    speculative_ngram_max_bfs_breadth: int | None = flag("--speculative-ngram-max-bfs-breadth", ge=1)
    speculative_ngram_min_bfs_breadth: int | None = flag("--speculative-ngram-min-bfs-breadth", ge=1)
    extra_args: tuple[str, ...] = ()  # given as they are (a reader's, a grid's): checked, not built
    env: Mapping[str, str] = Field(default_factory=dict)  # the server's environment (e.g. SGLANG_SIMULATE_ACC_LEN)
    unset_env: tuple[str, ...] = ()  # removed from it first (a probe's policy)

    @classmethod
    def speculative(cls, algorithm: str, draft_tokens: int, draft_path: str | None, **fields: Any) -> SglangLaunch:
        """A chain of ``draft_tokens`` per verify (steps = draft tokens - 1, top-k 1), the draft model for EAGLE."""
        eagle = algorithm.upper().startswith("EAGLE")
        chain = {} if eagle else {"speculative_ngram_max_bfs_breadth": 1, "speculative_ngram_min_bfs_breadth": 1}
        return cls(
            speculative_algorithm=algorithm,
            speculative_draft_model_path=draft_path if eagle else None,
            speculative_num_steps=max(draft_tokens - 1, 1),
            speculative_eagle_topk=1,
            speculative_num_draft_tokens=draft_tokens,
            **chain,
            **fields,
        )


def option_of(field: str) -> str:
    """The command-line option a field of :class:`SglangLaunch` becomes (``attention_backend`` -> its flag)."""
    extra = SglangLaunch.model_fields[field].json_schema_extra
    option = extra.get("flag") if isinstance(extra, dict) else None
    if not isinstance(option, str):
        raise KeyError(f"SglangLaunch.{field} is no command-line option")
    return option


def flags_of(help_text: str) -> frozenset[str]:
    """The long options a launcher's ``--help`` lists."""
    return frozenset(re.findall(r"(--[a-z0-9][a-z0-9-]*)", help_text))


@dataclass(frozen=True)
class LaunchTarget:
    """The SGLang a command is built for: what it is (``name``), the long options it accepts and, where known, its
    version, the FlashInfer it pins and the environment variables it reads."""

    name: str
    flags: frozenset[str]
    version: str | None = None
    flashinfer: str | None = None
    env_names: frozenset[str] | None = None

    @property
    def has_pcie_ipc(self) -> bool:
        """Whether this SGLang and the FlashInfer it pins run SGLang's PCIe-IPC all-reduce (0.5.21+ on 0.7.0+)."""
        return version_at_least(self.version, PCIE_IPC_SGLANG) and version_at_least(
            self.flashinfer, PCIE_IPC_FLASHINFER
        )

    @property
    def has_fusion(self) -> bool:
        """Whether this SGLang takes a switch for FlashInfer's fused all-reduce + RMSNorm (either spelling)."""
        return bool({FUSION_FLAG, FUSION_BACKEND_FLAG} & self.flags)

    @classmethod
    def installed(cls, help_text: str, version: str | None = None, flashinfer: str | None = None) -> LaunchTarget:
        """The SGLang the launcher starts, as its ``--help`` lists its options (its version and FlashInfer's where
        the box reports them)."""
        return cls("the installed SGLang (its --help)", flags_of(help_text), version, flashinfer)

    @classmethod
    def audited(
        cls,
        version: str,
        flags_table: Mapping[str, frozenset[str]],
        pins: Mapping[str, str] | None = None,
        env_table: Mapping[str, frozenset[str]] | None = None,
    ) -> LaunchTarget:
        """SGLang ``version`` as its published wheel was audited (``verifylab gates matrix``): its flags, the FlashInfer
        it pins and the variables it reads where those tables have them; one line naming the versions audited
        otherwise."""
        if version not in flags_table:
            audited = ", ".join(sorted(flags_table, key=version_key)) or "none"
            raise LaunchError(f"SGLang {version}: no audited flags for it (audited: {audited}; verifylab gates matrix)")
        pin = (pins or {}).get(version)
        env = None if env_table is None else env_table.get(version)
        name = f"SGLang {version}" + (f" with FlashInfer {pin}" if pin else "") + " (its audited wheel)"
        return cls(name, frozenset(flags_table[version]), version, pin, env)


@dataclass(frozen=True)
class LaunchCommand:
    """A server's command line as built for one SGLang version: its arguments (without the launcher), the environment
    it sets and the variables it unsets, and what its flags were checked against."""

    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    unset: tuple[str, ...]
    checked_against: str

    def argv(self, launcher: Sequence[str] = SGLANG) -> list[str]:
        """The process's argument vector with ``launcher`` first (its environment is :attr:`env`)."""
        return [*launcher, *self.args]

    def shell(self, launcher: Sequence[str] = SGLANG) -> str:
        """The command as one shell line a reader copies: ``env -u`` for what it unsets, ``NAME=value`` for what it
        sets, then the launcher and the arguments, each quoted."""
        return shell_command([*(f"{k}={v}" for k, v in self.env), *self.argv(launcher)], self.unset)

    def reasons(self) -> list[tuple[str, str]]:
        """Each flag whose reason is not obvious and why it stands in the command (:data:`FLAG_REASONS`), in order."""
        return [(a, FLAG_REASONS[a]) for a in self.args if a in FLAG_REASONS]

    def value_of(self, name: str) -> str | None:
        """The value the command gives ``name`` (None where it gives none)."""
        args = list(self.args)
        return args[args.index(name) + 1] if name in args[:-1] else None


FLAG_REASONS = {  # a launch line's flags whose reason a reader would ask for
    "--trust-remote-code": "the model's config.json names remote code (auto_map): SGLang refuses to load it without",
    "--attention-backend": "the backend the answer priced (its verify kernel sets the long-context answer, chapter 1)",
    "--kv-cache-dtype": "the KV dtype the answer's pool assumes (fp8 holds twice the tokens of bf16)",
    FUSION_OFF_FLAG: "all-reduce fusion stays off where the answer priced it off: this version turns it on by itself "
    "once its gates open",
    "--max-running-requests": "the running-request cap the plan chose under your SLO and load",
    "--cuda-graph-max-bs-decode": "CUDA graphs cover every running request up to the cap",
    "--cuda-graph-max-bs": "CUDA graphs cover every running request up to the cap",
}


def setting_args(**settings: Any) -> list[str]:
    """The flags of the named launch settings alone, as the builder writes them (a probe's policy records its TP
    size and custom all-reduce this way): ``setting_args(tp_size=8)`` -> ``["--tp-size", "8"]``."""
    launch = SglangLaunch(**settings)
    return [a for name in SglangLaunch.model_fields if name in settings for a in _field_args(launch, [], only=name)]


def _field_args(launch: SglangLaunch, switches: list[str], only: str | None = None) -> list[str]:
    """Every field that declares a flag, in declaration order: ``--flag value``, a true bool as the flag alone; the
    all-reduce's ``switches`` where its field stands."""
    args: list[str] = []
    for name, info in SglangLaunch.model_fields.items():
        if only is not None and name != only:
            continue
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        option, value = extra.get("flag"), getattr(launch, name)
        if name == "allreduce":
            args += switches
        elif isinstance(option, str) and value is not None and value is not False:
            args += [option] if value is True else [option, str(value)]
    return args


GRAPH_FLAGS = ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs")  # 0.5.14+ has the first; 0.5.20 drops the second
GRAPH_SETTINGS = (*GRAPH_FLAGS, "--cuda-graph-bs", "--disable-cuda-graph")  # a server's own CUDA-graph settings


def _graph_args(launch: SglangLaunch, flags: frozenset[str]) -> list[str]:
    """The decode CUDA-graph batch cap as the version spells it (its first of :data:`GRAPH_FLAGS`)."""
    if launch.cuda_graph_max_bs is None:
        return []
    option = next((f for f in GRAPH_FLAGS if f in flags), GRAPH_FLAGS[-1])
    return [option, str(launch.cuda_graph_max_bs)]


def _allreduce_args(launch: SglangLaunch, flags: frozenset[str]) -> tuple[list[str], dict[str, str]]:
    """The flags and environment that put the server on ``launch.allreduce`` in a version with ``flags``."""
    if launch.allreduce is AllReduce.FUSED:
        return ([FUSION_BACKEND_FLAG, FUSION_BACKEND] if FUSION_BACKEND_FLAG in flags else [FUSION_FLAG]), {}
    off = [FUSION_OFF_FLAG] if FUSION_OFF_FLAG in flags else []  # fusion stays off where a version auto-enables it
    if launch.allreduce is AllReduce.PCIE_IPC:
        return off, {PCIE_IPC_ENV: "1"}
    return off, {}


def build_command(launch: SglangLaunch, target: LaunchTarget) -> LaunchCommand:
    """``launch`` as a command line for ``target`` (an audited version, or the installed SGLang): every flag it
    takes and, where the target's table has them, every SGLang variable it sets checked first; refused, naming the
    flag or variable and the target, for one it lacks."""
    accepted, checked_against = target.flags, target.name
    eagle = (launch.speculative_algorithm or "").upper().startswith("EAGLE")
    if eagle and not launch.speculative_draft_model_path:
        raise LaunchError(f"{launch.speculative_algorithm} needs a draft model (--speculative-draft-model-path)")
    switches, env = _allreduce_args(launch, accepted)
    args = [*_field_args(launch, switches), *_graph_args(launch, accepted), *launch.extra_args]
    unknown = [a.split("=")[0] for a in args if a.startswith("--") and a.split("=")[0] not in accepted]
    if unknown:
        raise LaunchError(f"{checked_against} does not accept {', '.join(dict.fromkeys(unknown))}")
    env = {**env, **launch.env}
    if target.env_names is not None:
        missing = [name for name in env if name.startswith("SGLANG_") and name not in target.env_names]
        if missing:
            raise LaunchError(f"{checked_against} reads no {', '.join(missing)}")
    return LaunchCommand(tuple(args), tuple(sorted(env.items())), tuple(launch.unset_env), checked_against)
