"""benchmarks: one command per budget of DESIGN.md (see benchmarks/README.md)."""
