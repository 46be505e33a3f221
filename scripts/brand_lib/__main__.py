"""`python -m scripts.brand_lib [OUTPUT_DIR]` from the repository root (scripts/brand)."""

from pathlib import Path
import sys

from .draw import BRAND_DIR, images


def main() -> None:
    """Writes every image into OUTPUT_DIR (default: the integration's brand/ folder)."""
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else BRAND_DIR
    out.mkdir(parents=True, exist_ok=True)
    for name, data in images().items():
        (out / name).write_bytes(data)
        print(f"{out / name}: {len(data)} bytes")


main()
