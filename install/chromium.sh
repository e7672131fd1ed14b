#!/usr/bin/env bash
# Debian's Chromium beside the venv, for the book's PDFs and the headless-browser tests (never `playwright install`:
# it downloads a browser of its own). Does nothing when chromium (or chromium-browser) is on PATH. Where apt-get is
# missing or refuses (not root, no network), says in one line how to get it and exits 0: the HTML book is built
# without the PDFs, and `make book` says so again. With --required (make test: the browser tests need it) it exits 1.
#
#   bash install/chromium.sh [--required]
set -uo pipefail
give_up=0
if [ "${1:-}" = "--required" ]; then give_up=1; fi
if command -v chromium > /dev/null 2>&1 || command -v chromium-browser > /dev/null 2>&1; then
  exit 0
fi
how="install Debian's chromium (apt-get install chromium) or put chromium on PATH, then make book again"
if ! command -v apt-get > /dev/null 2>&1; then
  echo "chromium.sh: no chromium on PATH and no apt-get here: the book's PDFs are skipped; $how" >&2
  exit $give_up
fi
run=()
if [ "$(id -u 2> /dev/null || echo 0)" != "0" ]; then
  if command -v sudo > /dev/null 2>&1 && sudo -n true 2> /dev/null; then
    run=(sudo -n)
  else
    echo "chromium.sh: no chromium on PATH and apt-get needs root here: the book's PDFs are skipped; $how" >&2
    exit $give_up
  fi
fi
echo "installing Debian's chromium (the book's PDFs, the browser tests)"
if ! { "${run[@]}" apt-get update -qq && DEBIAN_FRONTEND=noninteractive "${run[@]}" apt-get install -y -qq chromium > /dev/null; }; then
  echo "chromium.sh: apt-get could not install chromium (the lines above say why): the book's PDFs are skipped; $how" >&2
  exit $give_up
fi
exit 0
