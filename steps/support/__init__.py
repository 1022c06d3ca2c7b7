"""Typed helpers behind the step definitions: no step decorators live here."""
