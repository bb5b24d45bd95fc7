"""Reports: tables built from the store (or published figures) and their renderers."""
