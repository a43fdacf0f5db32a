"""``python -m policyopt``: the ``policyopt`` command."""
from policyopt.cli import main

raise SystemExit(main())
