"""The words and pins every stage shares: model and precision vocabularies, renamed names, pinned environments."""
