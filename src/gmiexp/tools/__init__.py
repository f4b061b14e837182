"""Command-line tools around gmiexp (``python -m gmiexp.tools.<name>``)."""
