"""The only home for private PyTorch internals (STYLE.md, principle 9): a torch upgrade that moves
one of them touches this package alone."""
