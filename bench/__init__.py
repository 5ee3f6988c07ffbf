"""Benchmarks: asya against its peers on one broker (`python -m bench`), and the admission
engine (`python bench/admission.py`)."""
