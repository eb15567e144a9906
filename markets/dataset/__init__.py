"""The bundled demo dataset (package data). See DATA_SOURCES.md beside these files."""
