"""The Textual console. Only this package imports Textual; it renders the core's
snapshots (`dflash_tui.console.session`) and sends intents back, nothing more."""
