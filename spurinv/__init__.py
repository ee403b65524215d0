"""spurinv: keep a GPU cluster controller honest about what hardware each node really has."""

__version__ = "0.1.0"
