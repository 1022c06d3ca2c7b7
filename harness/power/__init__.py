"""Power drivers: one protocol, one set of enums, drivers registered through entry points."""
