"""`python -m asya.cli`: the same as the `asya` command."""

from asya.cli import main

raise SystemExit(main())
