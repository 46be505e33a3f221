"""`python -m scripts.bench_lib ...` from the repository root."""

from .cli import main

raise SystemExit(main())
