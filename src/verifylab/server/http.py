"""The few blocking HTTP calls verifylab makes to a server it started (health, server info, the profiler's
start/stop): the standard library's client, redirects refused. Requests that are measured go through the harness's
aiohttp client (``bench.client``), which measured better than httpx against a real server
(benchmarks/client_fidelity): one third-party HTTP library, not two."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class HttpError(Exception):
    """The server could not be reached, did not answer in time, or answered with a redirect."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise HttpError(f"{req.full_url} answered a redirect ({code}) to {newurl}: refused")


_OPENER = urllib.request.build_opener(_NoRedirect())


def request(url: str, timeout_s: float, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    """GET ``url`` (POST ``body`` as JSON when given): (status, body bytes); an HTTP error status is an answer,
    no answer at all raises :class:`HttpError`."""
    data = None if body is None else json.dumps(body).encode()
    headers = {} if body is None else {"Content-Type": "application/json"}
    req = urllib.request.Request(url, data=data, headers=headers, method="GET" if body is None else "POST")
    try:
        with _OPENER.open(req, timeout=timeout_s) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:  # a status >= 400 is the server's answer
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:  # refused, reset, timed out, a bad URL
        raise HttpError(f"{url}: {getattr(exc, 'reason', exc)}") from None
