"""Benchmarks of an SGLang server: streaming client, single-stream method, concurrency sweep, statistics."""
