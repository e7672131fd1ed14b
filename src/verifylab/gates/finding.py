"""One thing a gates audit finds in a tree: a gate, a capability table, a JIT arch list, a limit or a
precondition, where it is and whether it is open for the target architecture."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

Kind = Literal["boolean_gate", "raise_guard", "capability_table", "jit_arch_list", "limit", "precondition"]
Status = Literal["closed", "open", "info"]


@dataclass
class Finding:
    """One gate, table, limit or precondition found in the tree."""

    file: str
    line: int
    function: str
    kind: Kind
    expression: str
    status: Status
    role: str = ""
    note: str = ""
    archs: list[int] = field(default_factory=list)

    def key(self) -> tuple[str, str]:
        return (self.file, self.function)

    def to_dict(self) -> dict:
        return asdict(self)
