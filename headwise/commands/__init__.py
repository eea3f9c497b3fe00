"""The ``headwise`` sub-commands, one module per user task (wired up in :mod:`headwise.cli`).

Each module has ``add_parser(subparsers)`` and ``run(args) -> int`` (the exit status).
"""
