"""The OpenAI-compatible chat-completions client and the per-tenant allowance of model calls."""
