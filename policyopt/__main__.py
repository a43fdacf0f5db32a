"""``python -m policyopt``: the ``policyopt`` command."""
from policyopt.cli import main

if __name__ == "__main__":  # guarded: POP's pool processes import the main module
    raise SystemExit(main())
