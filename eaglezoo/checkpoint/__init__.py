"""Reading drafters: safetensors and .bin files, config schemas, the dialects, and the canonical
spec every other part works from. Knows nothing of the Hub, the registry or verification."""
