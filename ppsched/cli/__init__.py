"""``ppsched`` command line. Each ``cmd_*.py`` module here adds its own subcommand(s)."""
