"""What spurinv prints and exports: JSON documents, their models, metrics, the fleet table."""
