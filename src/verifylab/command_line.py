"""The one way a shell command is printed for a reader to copy: every argument quoted by ``shlex.join``, so a path
with a space or a ``;`` stays one argument (``--model-path '/models/My Model; rm -rf ~'``) and nothing in it runs."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

SGLANG = ("python", "-m", "sglang.launch_server")


def shell_command(args: Sequence[str], unset: Sequence[str] = ()) -> str:
    """``args`` as one shell line, quoted; ``unset``: variables removed first (``env -u NAME ...``)."""
    prefix = ["env", *(part for name in unset for part in ("-u", name))] if unset else []
    return shlex.join([*prefix, *args])
