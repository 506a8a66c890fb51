"""Floor 0: the shared vocabulary every app may use. Imports no app of this project."""
