"""Discovery sources: each reads one part of the node under a :class:`~spurinv.root.Root`.

:func:`spurinv.discovery.discover` runs them all and assembles the inventory.
"""
