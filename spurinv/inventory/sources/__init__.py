"""Discovery sources: each reads one part of the node under a :class:`~spurinv.inventory.root.Root`.

:func:`spurinv.inventory.discovery.discover` runs them all and assembles the inventory.
"""
