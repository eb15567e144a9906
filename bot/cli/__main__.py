"""`python -m bot.cli`: the `tapebot` command without the installed script."""

from bot.cli import main

raise SystemExit(main())
