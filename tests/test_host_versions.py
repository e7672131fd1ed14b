"""What a run records about the software it ran with (#54)."""

from __future__ import annotations

from pathlib import Path


def test_a_run_from_a_source_tree_records_verifylab_s_version(monkeypatch):
    """#54: a run made from a source tree (the device copy, verifylab not installed) records the version its
    pyproject.toml declares, marked +src, never None."""
    import tomllib
    from importlib import metadata

    from verifylab import host

    real = metadata.version

    def version(name: str) -> str:
        if name == "verifylab":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    declared = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]["version"]
    assert host.package_versions()["verifylab"] == f"{declared}+src"
