"""Every case issue #77 names, each with the tests that re-run it; ``python tests/before_change/round_six_cases.py``
runs them all (slow ones included) and prints one row per case: what it was, the tests, and their result now.
``tests/test_round_six_listed.py`` holds that every test named here exists."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
C, W, S = "tests/test_cache_boundary.py::", "tests/test_write_boundary.py::", "tests/test_secret_shapes.py::"
A, WB, RS = "tests/test_archive_boundary.py::", "tests/test_wheel_boundary.py::", "tests/test_round_six_cases.py::"
F = "tests/faults/"

CASES: list[tuple[str, list[str]]] = [
    ("a pickle planted in a folder others can write ran a command during box --plan",
     [C + "test_a_folder_is_used_only_if_no_one_else_can_write_it_or_a_folder_above_it",
      C + "test_nothing_planted_in_the_callers_own_folder_is_read_or_unpickled",
      C + "test_a_refused_cache_folder_is_said_once_and_the_command_runs_without_it"]),
    ("a link planted in the cache made the caller's 0600 file be overwritten",
     [C + "test_a_planted_link_is_replaced_never_written_through",
      C + "test_a_link_in_the_path_resolves_once_and_a_link_as_the_folder_to_anothers_folder_is_refused"]),
    ("a planted answer made box --probe write at traversal and absolute paths and print escape codes raw",
     [C + "test_a_kept_answer_with_hostile_names_writes_nothing_outside_its_page",
      C + "test_an_entry_name_is_a_plain_name_inside_its_folder",
      C + "test_printed_text_carries_no_control_sequence_but_colours"]),
    ("exhibit --csv data/reference/public_context.csv overwrote the public matrix; --out overwrote a manifest",
     [W + "test_a_command_never_overwrites_the_data_it_reads",
      W + "test_an_output_inside_a_data_folder_is_refused_by_every_spelling"]),
    ("key blocks, redis/Azure/AWS/Slack/Docker secrets reached pages, exports and PDFs",
     [S + "test_every_named_shape_is_found_in_free_text", "tests/test_hostile_book.py::"
      "test_a_hostile_build_publishes_no_secret_and_keeps_every_provenance",
      F + "test_token_shapes.py::test_a_token_by_its_shape_reaches_no_page_index_or_export",
      F + "test_token_shapes.py::test_verifylab_env_does_not_record_a_token_under_an_unknown_name"]),
    ("tokens leaked through git_commit, versions.*, driver and cuda",
     [S + "test_a_secret_in_a_typed_field_is_redacted", S + "test_a_commit_or_a_version_of_its_type_is_kept",
      S + "test_provenance_survives_redaction"]),
    ("a dead chapter kernel printed its log's end with credentials and control sequences",
     [S + "test_a_dead_chapters_log_is_printed_without_credentials_or_control_sequences",
      F + "test_kernel_log.py::test_a_dead_kernel_is_a_failed_chapter_with_its_last_words"]),
    ("a manifest landing while chapter 1 runs: the next build said 'executed: none'",
     ["tests/test_chapter_reads_boundary.py::test_what_a_chapter_read_is_fixed_before_it_runs",
      "tests/test_chapter_reads_boundary.py::test_the_rule_before_the_change_fails_the_same_property",
      "tests/test_incremental_book.py::test_what_lands_while_a_chapter_runs_is_not_recorded_as_read",
      F + "test_late_manifest.py::test_a_manifest_that_arrives_after_a_build_changes_what_the_chapter_read"]),
    ("store_runs.py --lease copied a symlinked private key and any *.log into the store",
     [A + "test_a_lease_whose_log_links_to_a_private_key_stores_nothing"]),
    ("store_runs.py copied /dev/zero until the disk limit",
     [A + "test_an_archive_unpacks_whole_or_not_at_all", A + "test_too_many_members_are_refused",
      F + "test_outside_files.py::test_what_is_not_a_regular_file_is_refused_before_reading"]),
    ("a 4.5 KB wheel cost 3.8 GB in gates matrix",
     [WB + "test_a_generated_wheel_reads_or_is_refused_in_one_line_within_its_budget",
      F + "test_untrusted_wheels.py::test_a_bad_wheel_is_one_line_naming_it_and_nothing_is_written"]),
    ("a 1.1 KB wheel was a quadratic regex bomb",
     [WB + "test_a_member_of_any_opener_repeated_is_read_in_time_linear_in_its_length",
      WB + "test_openers_mixed_are_read_in_time_linear_in_their_length"]),
    ("a wheel without a FlashInfer pin asked pip for flashinfer-python==None",
     [F + "test_untrusted_wheels.py::test_a_wheel_without_a_flashinfer_pin_never_asks_pip_for_none"]),
    ("box --verify trusted a server reporting no accept length, or lying after warm-up",
     ["tests/test_owners_loop.py::test_every_request_of_a_held_server_is_checked_not_its_average",
      "tests/test_held_accept_boundary.py::test_a_request_off_by_more_than_a_pass_or_without_a_count_is_named"]),
    ("box --verify waited 60 s per hung request with no deadline",
     ["tests/test_bench.py::test_a_request_past_its_deadline_fails_named_and_a_stall_is_said_while_it_lasts"]),
    ("bench --run-id <committed probe> marked that probe a test double",
     [RS + "test_a_benchmark_never_writes_into_a_run_it_did_not_make"]),
    ("box --plan --probe RUN --tp 4 planned another TP without a word",
     [RS + "test_a_probes_plan_at_another_tp_is_refused_naming_both"]),
    ("--gpu RTX-PRO-6000 (upper case) skipped the public data",
     [RS + "test_the_gpu_in_any_spelling_reaches_the_public_evidence"]),
    ("public rows at 0.1 us for a PCIe all-reduce or 0.9 s for 1 KB were accepted",
     ["tests/test_public_bounds.py::test_the_issues_rows_are_refused",
      "tests/test_public_bounds.py::test_a_latency_is_accepted_exactly_inside_its_bounds",
      F + "test_public_rows_bounded.py::test_box_plan_never_prices_an_unphysical_row"]),
    ("speculative rates above the accept length moved chapter 4's decision",
     [F + "test_public_rows_bounded.py::test_an_unphysical_public_row_is_refused_naming_it",
      "tests/test_context_model.py::test_no_exported_gain_above_its_accept_length_goes_unflagged"]),
    ("runs migrate / runs list ended in TypeError or RecursionError on a mistyped or deep manifest",
     ["tests/test_hostile_manifests.py::test_a_deep_manifest_is_refused_by_both_commands",
      "tests/test_hostile_manifests.py::test_a_mistyped_manifest_is_refused_in_one_line"]),
    ("gpu-box.sh PY SRC --box-only dropped the flag (PY -h too)",
     ["tests/test_gpu_box_args.py::test_a_trailing_box_only_is_an_option_not_a_path",
      "tests/test_gpu_box_args.py::test_help_anywhere_changes_nothing"]),
    ("a cell x;=cmd|... reached trace --csv and the exports unquoted",
     [F + "test_every_csv_neutral.py::test_trace_summarize_csv_neutralises_a_marker_that_is_a_formula",
      F + "test_every_csv_neutral.py::"
      "test_no_separator_a_spreadsheet_splits_on_starts_a_formula_and_every_cell_reads_back"]),
    ("the suite failed once on a fresh clone under load (chapter 2 recorded no reads)",
     ["tests/test_incremental_book.py::test_a_second_build_executes_only_the_chapters_whose_inputs_changed"]),
]  # fmt: skip


def _results(ids: list[str]) -> dict[str, str]:
    """Each test's outcome by its node id (parametrized cases folded: failed if any failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "cases.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow or browser",
               "-n", "2", f"--junitxml={xml}", *ids]  # fmt: skip
        subprocess.run(cmd, cwd=ROOT, check=False)
        outcome: dict[str, str] = {}
        for case in ET.parse(xml).getroot().iter("testcase"):
            module = case.get("classname", "").replace(".", "/") + ".py"
            node = f"{module}::{case.get('name', '').split('[')[0]}"
            failed = case.find("failure") is not None or case.find("error") is not None
            skipped = case.find("skipped") is not None
            was = outcome.get(node, "passed")
            outcome[node] = "failed" if failed or was == "failed" else ("skipped" if skipped else was)
    return outcome


def main() -> int:
    ids = sorted({node for _, nodes in CASES for node in nodes})
    outcome = _results(ids)
    print("| case named in #77 | tests | result now |\n| --- | --- | --- |")
    for case, nodes in CASES:
        said = [outcome.get(n, "not run") for n in nodes]
        verdict = "handled" if all(s == "passed" for s in said) else ", ".join(sorted(set(said)))
        cell = case.replace("|", "\\|")  # a table cell
        print(f"| {cell} | {len(nodes)} ({', '.join(said)}) | {verdict} |")
    return 0 if all(outcome.get(n) == "passed" for n in ids) else 1


if __name__ == "__main__":
    sys.exit(main())
