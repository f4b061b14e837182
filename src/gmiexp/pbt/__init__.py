"""Population-based training: the anchors' rules (``rules``) and mutations (``mutation``), pure and tested on tables.

The population controller that runs members on GMIs and exploits in place is designed in DESIGN.md ("Population-based
training") and not built yet; ``pbt=...`` runs exit 2 saying so, ``mode=plan`` shows the members.
"""
