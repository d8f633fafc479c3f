"""``python -m calculator`` runs the CLI."""

from .cli import main

main()
