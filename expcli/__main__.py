"""``python -m expcli``: the same as the ``expcli`` command."""

from expcli.cli import main

if __name__ == "__main__":
    main()
