"""Talking to the controller: views, transports (REST, scontrol), ownership of drains."""
