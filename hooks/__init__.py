"""The site's MkDocs hooks, one concern each (mkdocs.yml lists them in order).

MkDocs loads each hook from its path, with this folder on ``sys.path``
while it does; the tests and the tools import them as the package
``hooks``. A hook that needs a sibling's function imports it both ways::

    try:  # imported as the package hooks (tests, tools)
        from hooks.chapters import read_registry
    except ModuleNotFoundError:  # loaded by MkDocs from its path
        from chapters import read_registry
"""
