"""asya: multi-step AI/ML pipelines built from actors."""
