"""`perf=true`: how fast the programs that passed are (records, aggregation, report section,
and the GPU runners that time them)."""
