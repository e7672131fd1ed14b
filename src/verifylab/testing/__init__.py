"""Test doubles. Nothing here is measured data: numbers from these never enter data/ or the book."""
