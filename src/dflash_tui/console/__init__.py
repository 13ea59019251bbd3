"""The Textual-free console model: the session that wires monitor, jobs and transfers, the keymap, alert rules and typed views."""
