"""``python -m nsysmoe`` is the ``nsysmoe`` command."""

from nsysmoe.cli import main

main()
