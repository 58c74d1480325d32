"""Generation backends: `interface` (requests, completions, the Generator protocol),
`registry` (lookup by name), one module per backend (hf, vllm, openai), each
imported only when chosen."""
