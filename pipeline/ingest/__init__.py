"""Ingest of existing QA corpora into verifiable items."""
