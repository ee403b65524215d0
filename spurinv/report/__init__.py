"""What spurinv prints and exports: JSON documents and their shapes, metrics, the fleet table."""
