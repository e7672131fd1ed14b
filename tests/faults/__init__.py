"""Faults a hostile new user met (#17), one file per kind, each test reproducing its fault:

1 secrets: test_secrets · 2 gates apply/revert killed at every write, reinstalls: test_gates_crash ·
3 file modes and links: test_file_modes · 4 concurrent writers, kill at every write of a cell:
test_run_store_crash · 5 colliding names: test_names · 6 failed cells are not results: test_failed_cells ·
7 the client checks the server: test_client_trust · 8 the median's interval and effective concurrency:
test_statistics, test_failed_cells · 9 and 13 (traces) odd files and bad times: test_trace_inputs ·
10 versions: test_versions · 11 misspelt chapters and parameters: test_parameters, test_messages ·
12 keep-alive without tokens: test_stalls · 13 bad input and exhausted resources: test_bad_inputs,
test_resources · 14 errors as text, exit codes: test_messages · 15 signals to serve --hold:
test_serve_signals · 16 fail fast and progress on large traces: test_trace_inputs (columnar memory:
benchmarks/trace_throughput.py).
"""
