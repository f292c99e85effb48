"""``python -m tracedagent``: the same command as the ``tracedagent`` console script."""

from ._cli import main

if __name__ == "__main__":
    main()
