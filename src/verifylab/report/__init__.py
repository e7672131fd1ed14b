"""Charts, tables and recommendations built from run-store and reference tables."""
