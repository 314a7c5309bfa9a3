"""``python -m maxmargin``: the same as the ``maxmargin`` command."""

from .cli import main

if __name__ == "__main__":
    main()
