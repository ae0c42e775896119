"""The project's command-line tools, run from the repository root as
modules: ``python -m tools.lint_ja``, ``python -m tools.check_chapter``."""
