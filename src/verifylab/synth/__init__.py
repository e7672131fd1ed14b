"""A TP-sharded synthetic verify pass: real sharded matmuls and real all-reduces, profiled."""
