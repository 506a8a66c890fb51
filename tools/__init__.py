"""Floor 1: the tool registry and the built-in tools. Plans name tools; this app says what each one is."""
