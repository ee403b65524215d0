"""What spurinv remembers between runs: the state file, its books, intents, file locations."""
