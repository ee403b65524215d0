"""The operator's configuration: loading, origins, errors in the operator's words."""
