"""The paper's cost models in one place.

:mod:`.layout`: Tables 3-5 and equations 1-3 (which layout template); each layout contributes its
own rows (``Layout.resource``, ``Layout.comm``). :mod:`.reduction`: Table 2 (which gradient reduction).
"""
