"""``python -m tracedagent``: the same command as the ``tracedagent`` console script."""

from ._cli._main import main

if __name__ == "__main__":
    main()
