"""Shared test setup.

``pytester`` runs whole pytest sessions in a temporary directory, which is how the
tracedagent pytest plugin is tested as a user would meet it. The plugin itself is
loaded through its ``pytest11`` entry point (``pip install -e . --group test``).
"""

pytest_plugins = ["pytester"]
