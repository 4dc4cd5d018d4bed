"""Plumbing shared by every memory system and benchmark: seams (api), LLM access, embeddings, model files."""
