"""The Python of scripts/brand: the integration's brand images, drawn from geometry.

draw.py makes the PNG files (standard library only, the same bytes on every machine);
`python -m scripts.brand_lib [OUTPUT_DIR]` writes them. tests/test_brand.py compares the
shipped brand/ folder with `draw.images()`.
"""
