"""The bottom layer: configuration, local state (SQLite and every table's schema), units, task helpers."""
