"""What the node has: the sources under a root, discovery, the inventory model, classify."""
