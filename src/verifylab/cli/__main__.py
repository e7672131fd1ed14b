"""``python -m verifylab.cli``."""

from verifylab.cli import app

app()
